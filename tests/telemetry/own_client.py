"""A team's own code that builds its PrometheusConnect (prometheus-api-client), as the docs
say to write it: the URL, a header and Basic auth from its own configuration (here the
environment). `gpu-policy telemetry --prometheus-client`, the KFP component's
`prometheus_client` and the Airflow hook's `prometheus` take it."""

import os

from prometheus_api_client import PrometheusConnect

URL_ENV = "GPU_POLICY_TEST_PROMETHEUS_URL"


def prometheus_connect() -> PrometheusConnect:
    return PrometheusConnect(url=os.environ[URL_ENV], headers={"X-Scope-OrgID": "ml-team"},
                             auth=("reader", os.environ.get("GPU_POLICY_TEST_PROMETHEUS_PASSWORD", "s3cret")))
