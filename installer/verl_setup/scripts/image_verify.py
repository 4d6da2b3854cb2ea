"""docker build: inside the built image, compare the installed versions with the pins (metadata
only, fast). argv: PIN... (NAME==VERSION). Shipped as text (`python -c`): no path reaches the image.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import PackageNotFoundError, version

from packaging.version import Version  # as verify compares: 2.11 == 2.11.0

bad = {}
for pin in sys.argv[1:]:
    name, _, want = pin.partition("==")
    name = name.split("[")[0]
    have: str | None
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have is None or Version(have) != Version(want):
        bad[name] = [want, have]
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "mismatches": bad}))
