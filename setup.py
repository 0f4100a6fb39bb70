"""Package discovery: `domains/` ships inside the wheel as `tau2_gym.domains`; `tau2_gym_env` is the verifiers
environment by name (`vf-eval tau2-gym-env`, extra `verifiers`).

A new domain is a folder under `domains/`; it is picked up here without editing this file.
"""

from setuptools import find_packages, setup

packages = find_packages(include=["tau2_gym", "tau2_gym.*"])
packages += ["tau2_gym_env", "tau2_gym.domains"] + [f"tau2_gym.domains.{p}" for p in find_packages("domains")]

setup(
    packages=packages,
    package_dir={"tau2_gym": "tau2_gym", "tau2_gym.domains": "domains"},
    package_data={
        "tau2_gym.data": ["manifests/*.tsv"],
        "tau2_gym.results": ["report_assets/*.css", "report_assets/*.js"],
        "tau2_gym.frameworks.openenv": ["openenv.yaml"],
    },
)
