"""How many examples a property test (hypothesis) runs: a bounded budget in the default run, a larger
one under the ``ci`` profile.

README's test command must finish in minutes on 2 cores, so each ``@settings(max_examples=examples(N))``
runs a fraction of its N there (``FAST_FRACTION``, at least ``FAST_MIN``); ``.ci/run``'s second run
(``pytest -m "slow or fuzz" --hypothesis-profile=ci``) runs every property test again with N // ``CI_FRACTION``
(CI's whole run must stay under its time limit; N is the budget of a run by hand with ``CI_FRACTION = 1``).
The profiles are registered in conftest.py, which hypothesis loads before any test module is imported.
"""
from __future__ import annotations

from hypothesis import settings

FAST_FRACTION = 10
CI_FRACTION = 2
FAST_MIN = 20


def full_budget() -> bool:
    """True under the ``ci`` profile: every property test runs its larger example count."""
    return settings.get_current_profile_name() == "ci"


def examples(full: int) -> int:
    """``full // CI_FRACTION`` under the ``ci`` profile, else ``full // FAST_FRACTION`` (at least ``FAST_MIN``, at most ``full``)."""
    return min(full, max(FAST_MIN, full // (CI_FRACTION if full_budget() else FAST_FRACTION)))
