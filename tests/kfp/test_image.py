"""Where the components run: in an image that installs nothing, or installing one exact wheel."""

import pytest

pytest.importorskip("kfp", reason="kfp is not installed here; `make test` runs these in .venv-kfp")

from gpu_policy import DEFAULT_IMAGE, GpuPolicyError  # noqa: E402
from gpu_policy.kfp import WHEEL_BASE_IMAGE, components  # noqa: E402

URL = "https://example.com/releases/gpu_policy-0.1.0-py3-none-any.whl#sha256=" + "0" * 64


def container(ops):
    return ops.plan_gpu_allocation.component_spec.implementation.container


def test_an_image_installs_nothing():
    for ops, image in ((components(), DEFAULT_IMAGE), (components("registry.example.com/ml/gpu-policy:1"),
                                                         "registry.example.com/ml/gpu-policy:1")):
        assert container(ops).image == image
        command = " ".join(container(ops).command)
        assert "pip install" not in command and "ensurepip" not in command


def test_a_wheel_url_is_installed_as_given(tmp_path):
    ops = components(wheel=URL)
    assert container(ops).image == WHEEL_BASE_IMAGE
    command = " ".join(container(ops).command)
    assert f"'{URL}'" in command and "gpu-policy==" not in command


def test_a_wheel_path_is_installed_by_its_absolute_path(tmp_path, monkeypatch):
    (tmp_path / "gpu_policy-0.1.0-py3-none-any.whl").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    command = " ".join(container(components(wheel="gpu_policy-0.1.0-py3-none-any.whl")).command)
    assert f"'{tmp_path / 'gpu_policy-0.1.0-py3-none-any.whl'}'" in command


@pytest.mark.parametrize("wheel", ["gpu-policy", "gpu-policy==0.1.0", "gpu-policy[kfp]",
                                   "https://example.com/simple/gpu-policy/", "other_package-1.0-py3-none-any.whl"])
def test_a_name_from_an_index_is_refused(wheel):
    with pytest.raises(GpuPolicyError, match=r"^components: wheel: must be the path or http\(s\)/file URL of a "
                                             r"gpu_policy-\*\.whl .*, got '"):
        components(wheel=wheel)


def test_a_missing_wheel_file_is_refused(tmp_path):
    with pytest.raises(GpuPolicyError, match=r"^components: wheel: must be an existing file .*, got '.*nowhere"):
        components(wheel=str(tmp_path / "nowhere" / "gpu_policy-0.1.0-py3-none-any.whl"))


def test_image_and_wheel_together_are_refused():
    with pytest.raises(GpuPolicyError, match=r"^components: image, wheel: must be one or the other"):
        components("registry.example.com/ml/gpu-policy:1", wheel=URL)


@pytest.mark.parametrize("image", ["", "  ", "gpu policy:1"])
def test_a_malformed_image_is_refused(image):
    with pytest.raises(GpuPolicyError, match=r"^components: image: must be an image reference"):
        components(image)
