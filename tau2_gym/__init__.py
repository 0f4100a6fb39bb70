"""tau2-gym: Gymnasium environments for tau2-bench, with upstream-exact tools, replay and rewards."""

from __future__ import annotations

from pathlib import Path as _Path

__version__ = "0.1.0"

# Running from a source checkout without installing: `tau2_gym.domains` lives in the top-level
# `domains/` folder (the wheel maps it there); make it importable the same way.
_src_domains = _Path(__file__).resolve().parent.parent / "domains"
if (_src_domains / "__init__.py").is_file() and not (_Path(__file__).resolve().parent / "domains").exists():
    __path__.append(str(_src_domains.parent))

import tau2_gym.domains  # noqa: E402,F401 - registers the built-in domains (one line each in domains/__init__.py)
from tau2_gym.core.domain import domain_names, get_domain_spec, load_domain, register_domain  # noqa: E402 - after the source-checkout path set-up above

__all__ = ["__version__", "load_domain", "domain_names", "get_domain_spec", "register_domain", "replay"]


def __getattr__(name: str):
    if name == "replay":
        from tau2_gym.results.replay import replay

        return replay
    raise AttributeError(f"module 'tau2_gym' has no attribute {name!r}")


# Gymnasium ids tau2/<domain>-v0 (+ -solo-v0), so that gym.make("tau2_gym:tau2/airline-v0") works unimported.
from tau2_gym.envs import register_envs as _register_envs  # noqa: E402 - after the source-checkout path set-up above

_register_envs()
