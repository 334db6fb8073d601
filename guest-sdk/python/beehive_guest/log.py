"""Lines for the host's log, tagged with the plugin and the object of the
pass. Under pytest they go to stderr. `logging` works too: records of the
`beehive` logger (and its children) are sent to the host."""

import logging
import sys

def _emit(level: str, message: str) -> None:
    from . import _host

    if _host.wasm is None:
        print(f"{level.upper()}: {message}", file=sys.stderr)
    else:
        _host.wasm.log(level, message)


def trace(message: str) -> None:
    _emit("trace", message)


def debug(message: str) -> None:
    _emit("debug", message)


def info(message: str) -> None:
    _emit("info", message)


def warning(message: str) -> None:
    _emit("warn", message)


def error(message: str) -> None:
    _emit("error", message)


class HostHandler(logging.Handler):
    """Sends `logging` records to the host's log."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            level = "error"
        elif record.levelno >= logging.WARNING:
            level = "warn"
        elif record.levelno >= logging.INFO:
            level = "info"
        else:
            level = "debug"
        _emit(level, self.format(record))


#: A logger whose records reach the host's log.
logger = logging.getLogger("beehive")
logger.addHandler(HostHandler())
logger.setLevel(logging.DEBUG)
logger.propagate = False
