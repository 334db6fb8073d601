"""`beehive-py build app.py -o NAME.wasm`: a Python plugin as a WebAssembly
component, from any directory.

It runs componentize-py (installed with `pip install beehive-guest[build]`)
on the module with this SDK beside it, against the WIT contract this package
carries (`beehive:controller@0.2.0`), for its world `plugin-with-http` (the
SDK calls wasi:http). Only the module's directory's `.py` files and the SDK
go in: never tests, caches or bytecode.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SDK = Path(__file__).resolve().parent
WIT = SDK / "wit"


#: The world every module is built for: one `controller` export, and the
#: wasi:http import the SDK's `http` uses.
WORLD = "plugin-with-http"


def componentize_py() -> str:
    """componentize-py beside this Python, else on the PATH."""
    beside = Path(sys.executable).parent / "componentize-py"
    if beside.exists():
        return str(beside)
    found = shutil.which("componentize-py")
    if found is None:
        sys.exit(
            "beehive-py: componentize-py is not installed: "
            "pip install 'beehive-guest[build]'"
        )
    return found


def stage(module: Path, into: Path) -> None:
    """Copies the module's directory's modules and the SDK into `into`."""
    app, sdk = into / "app", into / "sdk" / "beehive_guest"
    app.mkdir(parents=True)
    for source in module.parent.glob("*.py"):
        shutil.copy(source, app / source.name)
    shutil.copytree(
        SDK,
        sdk,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "wit", "tests"),
    )


def build(module: Path, output: Path, world: str | None) -> None:
    if module.suffix != ".py" or not module.is_file():
        sys.exit(f"beehive-py: {module}: not a Python module")
    world = world or WORLD
    with tempfile.TemporaryDirectory() as staging:
        staged = Path(staging)
        stage(module, staged)
        partial = output.with_name(f".{output.name}.tmp")
        command = [
            componentize_py(),
            "-d", str(WIT),
            "-w", world,
            "componentize", module.stem,
            "-p", str(staged / "app"),
            "-p", str(staged / "sdk"),
            "-o", str(partial),
        ]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        # componentize-py says nothing for the seconds it takes.
        say(f"componentizing {module.name} for world {world} with componentize-py...")
        started = time.monotonic()
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            sys.exit(f"beehive-py: componentize-py failed ({done.returncode})")
        # Renamed into place: a host watching the directory never sees a
        # half-written file.
        partial.replace(output)
    megabytes = output.stat().st_size / 1e6
    say(f"built in {time.monotonic() - started:.1f} s ({megabytes:.1f} MB)")
    print(f"{output} (world {world})")


def say(line: str) -> None:
    """A progress line, on stderr: stdout names what was built."""
    print(f"beehive-py: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="beehive-py", description="Builds Beehive plugins written in Python."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser(
        "build", help="build a module (app.py) into a plugin component"
    )
    build_command.add_argument("module", type=Path, help="the app module, e.g. app.py")
    build_command.add_argument(
        "-o", "--output", type=Path, help="the component to write (default: DIR.wasm)"
    )
    build_command.add_argument(
        "-w", "--world", help=f"the WIT world (default: {WORLD})"
    )
    args = parser.parse_args(argv)
    module = args.module.resolve()
    output = args.output or Path(f"{module.parent.name}.wasm")
    build(module, output.resolve(), args.world)


if __name__ == "__main__":
    main()
