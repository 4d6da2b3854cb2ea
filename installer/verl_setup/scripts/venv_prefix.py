"""install: where a moved venv believes it is (sys.prefix), after the swap into place."""

import sys

print(sys.prefix)
