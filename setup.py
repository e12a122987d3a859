"""Packaging for gpu-policy: GPU fair share and packing for ML pipelines."""
import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(
    r'__version__ = "([^"]+)"', (HERE / "gpu_policy" / "_version.py").read_text()
).group(1)

setup(
    name="gpu-policy",
    version=VERSION,
    description="GPU fair share, reclaim and packing as PuLP integer programs, "
    "for Kubeflow Pipelines and Airflow",
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["gpu_policy", "gpu_policy.*"]),
    package_data={"gpu_policy": ["examples/*.yaml"]},
    install_requires=[
        "pulp>=3.3.2,<4",  # 3.x bundles CBC; 4.x changes how variables are made; 3.3.2 has add_variable
        "highspy>=1.7",  # HiGHS, the default solver: in-process and the faster (docs/policy.md)
        "pyyaml>=6",
        "fsspec>=2023.1",  # checkpoint stores: local, memory://, s3:// and gs:// with their backends
        "numpy>=1.24",  # the example trainer
        "kubernetes>=28",  # kfp 2.17 needs <31, the Airflow provider >=36: both work
        "prometheus-client>=0.17,<1",  # the controller's /metrics
        "cryptography>=42",  # the admission webhook's self-signed CA and serving certificate
    ],
    extras_require={
        "highs": [],  # kept for old install commands: HiGHS is now always installed
        "kfp": ["kfp>=2.17,<3", "kfp-kubernetes>=2.17"],
        "airflow": ["apache-airflow>=3,<4", "apache-airflow-providers-cncf-kubernetes>=10", "matplotlib>=3.7"],
        "report": ["matplotlib>=3.7"],
        # a PrometheusConnect of the user's own for DCGM telemetry (docs/telemetry.md); its core needs only
        # requests and dateparser
        "prometheus": ["prometheus-api-client>=0.7.2,<0.8"],
        "s3": ["s3fs>=2023.1"],  # checkpoints at s3:// URLs
        "gcs": ["gcsfs>=2023.1"],  # checkpoints at gs:// URLs
        # the trainer callbacks (docs/checkpointing.md): Hugging Face's Trainer needs accelerate
        "hf": ["transformers>=4.46,<6", "accelerate>=1.1", "torch>=2.2"],
        "lightning": ["lightning>=2.2,<3", "torch>=2.2"],
        "dev": ["pytest>=8", "matplotlib>=3.7", "hypothesis>=6.100", "kubernetes-validate>=1.36,<2", "cel-python>=0.5,<0.6"],
        # make dist; the Dockerfile's check reads it with Docker's own parser (the dockerfile package)
        "release": ["build>=1.2", "twine>=5", "dockerfile>=3.3"],
    },
    entry_points={
        "console_scripts": ["gpu-policy=gpu_policy.cli:main"],
        "apache_airflow_provider": ["provider_info=gpu_policy.airflow:get_provider_info"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: System :: Distributed Computing",
    ],
)
