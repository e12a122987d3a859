"""The admission webhook's certificates, made with `cryptography`: a self-signed CA and the
serving certificate it signs for the webhook's Service, and the PEM bundles of CAs that the
Secret's `ca.crt` and the configuration's `caBundle` hold.

Each renewal makes a new CA and a new serving certificate and forgets the CA's key, so the
Secret never holds a key that could sign another certificate. The CAs still valid stay in
the bundles, so the API server trusts both the certificate a replica serves now and the one
it will serve after it reloads.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: how far back a new certificate is valid from, for API servers whose clocks run behind
_BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class Issued:
    """A new CA (its certificate only) and the serving certificate and key it signed."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


def service_names(service: str, namespace: str) -> list[str]:
    """The DNS names the API server may reach the Service by, the contract's first."""
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local", f"{service}.{namespace}",
            service]


def issue(names: list[str], now: datetime.datetime, valid: datetime.timedelta) -> Issued:
    """A CA and a serving certificate for `names` (the first is its subject), both valid from
    an hour before `now` for `valid`; EC P-256 keys."""
    begin, end = now - _BACKDATE, now + valid
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"gpu-policy webhook CA {now:%Y-%m-%dT%H:%M:%SZ}")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(begin).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(begin).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return Issued(ca.public_bytes(serialization.Encoding.PEM), cert.public_bytes(serialization.Encoding.PEM), key_pem)


def certificates(pem: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM bundle; none when it holds none or cannot be read."""
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        return []


def bundle(pems: list[bytes], now: datetime.datetime) -> bytes:
    """One PEM bundle of every certificate in `pems` that is valid at `now`, each once, in order."""
    seen, out = set(), []
    for pem in pems:
        for cert in certificates(pem):
            fingerprint = cert.fingerprint(hashes.SHA256())
            if fingerprint not in seen and cert.not_valid_before_utc <= now < cert.not_valid_after_utc:
                seen.add(fingerprint)
                out.append(cert.public_bytes(serialization.Encoding.PEM))
    return b"".join(out)


def serves_until(cert_pem: bytes, key_pem: bytes, name: str, ca_pem: bytes,
                 now: datetime.datetime) -> datetime.datetime | None:
    """When the pair stops being servable: the certificate names `name`, goes with the key,
    is valid at `now` and was signed by a CA of `ca_pem`. None when it is not servable now
    (an empty Secret, another name, a key of another pair, an unknown CA, expired)."""
    found = certificates(cert_pem)
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):  # not a key, or one protected by a password
        return None
    if not found or _public(found[0].public_key()) != _public(key.public_key()):
        return None
    cert = found[0]
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
    except x509.ExtensionNotFound:
        return None
    signed = any(_signed_by(cert, ca) for ca in certificates(ca_pem))
    if name not in names or not signed or not cert.not_valid_before_utc <= now < cert.not_valid_after_utc:
        return None
    return cert.not_valid_after_utc


def _public(key) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
