"""The run skeleton shared by every recipe (see ``lifecycle`` and ``staging``, and
docs/atomic-output.md for the publication rule); ``units``: map/reduce over input files, the
spills, resume and ``--workers`` (docs/scale.md)."""
from fastenc.run import faults, forking  # noqa: F401  (forking takes its thread baseline at import: see there)
from fastenc.run.lifecycle import OutputSpec, Run, Stats, finished_same, make_request, output_error
from fastenc.run.staging import Stage, StagedFile, clean_stale, publish_folder, publish_into

__all__ = ["faults", "OutputSpec", "Run", "Stats", "make_request", "finished_same", "output_error",
           "Stage", "StagedFile", "clean_stale", "publish_folder", "publish_into"]
