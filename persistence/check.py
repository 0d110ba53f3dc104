"""`millrace-check-aof [--fix] <manifest|file>` and `millrace-check-snapshot <file>`.

As redis-check-aof and redis-check-rdb: read a file the server would load, say
where it stops being valid and why, and (AOF, `--fix`) cut a truncated last
increment back to its last whole command, as the server does at start-up
under `aof-load-truncated yes`. Corruption before the end is reported, never
"fixed" by throwing data away silently.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import aof as aoffile
from . import snapshot


def check_snapshot(path: str) -> int:
    print(f"[offset 0] Checking snapshot file {path}")
    try:
        loaded = snapshot.read(path)
    except OSError as exc:
        print(f"Cannot open {path}: {exc.strerror}")
        return 1
    except snapshot.SnapshotError as exc:
        print(f"--- SNAPSHOT ERROR DETECTED ---\n[offset {exc.offset}] {exc.reason}")
        return 1
    print(f"[info] {loaded.keys} keys read in {len(loaded.dbs)} databases")
    print(f"[info] replication ID {loaded.replid or '-'}, offset {loaded.repl_offset}")
    print("\\o/ snapshot looks OK! \\o/")
    return 0


def _check_resp(path: str, last: bool, fix: bool) -> bool:
    with aoffile.mapped(path) as data:
        good, error = aoffile.valid_prefix(data, path)
        size = len(data)
    print(f"AOF analyzed: filename={os.path.basename(path)}, size={size}, ok_up_to={good}, diff={size - good}")
    if error is None:
        print(f"AOF {os.path.basename(path)} is valid")
        return True
    print(f"{error.reason} at offset {error.offset}")
    if not (error.truncated and last):
        print(f"AOF {os.path.basename(path)} is not valid: the damage is not at its end, so it is not fixed automatically")
        return False
    if not fix:
        print(f"AOF {os.path.basename(path)} is not valid. Use the --fix option to try fixing it.")
        return False
    with open(path, "r+b") as handle:
        handle.truncate(good)
        os.fsync(handle.fileno())
    print(f"Successfully truncated AOF {os.path.basename(path)}")
    return True


def check_aof(target: str, fix: bool) -> int:
    if target.endswith(".manifest"):
        directory = os.path.dirname(os.path.abspath(target))
        try:
            with open(target, "rb") as handle:
                manifest = aoffile.Manifest.parse(handle.read(), target)
        except OSError as exc:
            print(f"Cannot open {target}: {exc.strerror}")
            return 1
        except aoffile.AofError as exc:
            print(f"Invalid AOF manifest file format: {exc.reason} (offset {exc.offset})")
            return 1
        if not manifest.files:
            print(f"Invalid AOF manifest file format: {aoffile.EmptyManifestError(target, empty=not os.path.getsize(target)).reason}")
            return 1
        paths = [os.path.join(directory, item.name) for item in manifest.files]
        print(f"Start checking Multi Part AOF: {len(paths)} files")
    else:
        paths = [target]
    ok = True
    for index, path in enumerate(paths):
        if not os.path.exists(path):
            print(f"AOF {path} does not exist")
            return 1
        if aoffile.is_snapshot(path):
            print(f"Start to check BASE AOF (snapshot format): {os.path.basename(path)}")
            ok = check_snapshot(path) == 0 and ok
        else:
            ok = _check_resp(path, last=index == len(paths) - 1, fix=fix) and ok
    if ok and len(paths) > 1:
        print("All AOF files and manifest are valid")
    return 0 if ok else 1


def main_aof(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="millrace-check-aof", description="Check (and --fix a truncated end of) a Millrace AOF.")
    parser.add_argument("--fix", action="store_true", help="cut a truncated last increment back to its last whole command")
    parser.add_argument("file", help="the manifest (appendonly.aof.manifest) or one AOF file")
    args = parser.parse_args(argv)
    sys.exit(check_aof(args.file, args.fix))


def main_snapshot(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="millrace-check-snapshot", description="Verify a Millrace snapshot file.")
    parser.add_argument("file")
    args = parser.parse_args(argv)
    sys.exit(check_snapshot(args.file))
