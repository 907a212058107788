# Signals first, before the imports that take most of a start-up: a Ctrl-C or SIGTERM then is
# one line and exit 130/143, never a traceback (fastenc.cli.stop).
import os

from fastenc.cli import stop

try:
    stop.install()
    from fastenc.cli import console_main

    console_main()  # (ends the process itself)
except KeyboardInterrupt:  # a signal before console_main's own handling: in install(), or just after the import
    os._exit(stop.report())
