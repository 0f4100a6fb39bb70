"""Tasks to train on: generated tasks, verified by the env that will score them, that never touch the test split.

A domain's generator (``domains/<name>/generate.py``: drafts in upstream's task format, rules citing the policy)
plugs into this machinery: the seeded drafting loop, the contamination check, verification through the episode
driver, the ``train`` / ``held_out`` split, atomic writing with provenance and a diversity report
(``docs/tasks-to-train-on.md``). ``tau2-gym generate`` is its command line.
"""

from tau2_gym.generation.contamination import Contamination, EntityIndex, contamination_check
from tau2_gym.generation.drafters import Drafter, drafter_domains, find_drafter, get_drafter
from tau2_gym.generation.engine import DEFAULT_HELD_OUT, MACHINERY, MACHINERY_VERSION, SPLITS, GeneratedSet, generate
from tau2_gym.generation.folder import MANIFEST, GenerationError, generated_domains, read_manifest
from tau2_gym.generation.verify import CHECKS, REASONS, Verifier

__all__ = [
    "CHECKS",
    "DEFAULT_HELD_OUT",
    "MACHINERY",
    "MACHINERY_VERSION",
    "MANIFEST",
    "REASONS",
    "SPLITS",
    "Contamination",
    "Drafter",
    "EntityIndex",
    "GeneratedSet",
    "GenerationError",
    "Verifier",
    "contamination_check",
    "drafter_domains",
    "find_drafter",
    "generate",
    "generated_domains",
    "get_drafter",
    "read_manifest",
]
