# Signals first, before the imports that take most of a start-up: a Ctrl-C or SIGTERM then is
# one line and exit 130/143, never a traceback (fastenc.cli.stop).
from fastenc.cli import stop

stop.install()

from fastenc.cli import console_main  # noqa: E402

console_main()
