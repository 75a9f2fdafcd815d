"""What decode_report.py and measure_report.py share: the peers' versions, and benchmarks/ on
the module path, for measure.py."""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for measure.py


def peer_versions(work: Path, *packages: str) -> list[str]:
    """The installed versions of `packages` (e.g. "fairseq-fixed", "OpenNMT-py") in WORK/venv."""
    code = "import importlib.metadata as m, sys; print(*map(m.version, sys.argv[1:]))"
    result = subprocess.run(
        [str(work / "venv" / "bin" / "python"), "-c", code, *packages],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.split()
