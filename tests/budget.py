"""How many examples a property test (hypothesis) runs: a bounded budget in the default run, the full
one under the ``ci`` profile.

README's test command must finish in minutes on 2 cores, so each ``@settings(max_examples=examples(N))``
runs a fraction of its N there (``FAST_FRACTION``, at least ``FAST_MIN``); ``.ci/run``'s second run
(``pytest -m "slow or fuzz" --hypothesis-profile=ci``) runs every property test again with all N.
The profiles are registered in conftest.py, which hypothesis loads before any test module is imported.
"""
from __future__ import annotations

from hypothesis import settings

FAST_FRACTION = 10
FAST_MIN = 20


def full_budget() -> bool:
    """True under the ``ci`` profile: every property test runs its whole example count."""
    return settings.get_current_profile_name() == "ci"


def examples(full: int) -> int:
    """``full`` under the ``ci`` profile, else ``full // FAST_FRACTION`` (at least ``FAST_MIN``, at most ``full``)."""
    return full if full_budget() else min(full, max(FAST_MIN, full // FAST_FRACTION))
