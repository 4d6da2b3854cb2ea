"""abi: an interpreter's site-packages folders (JSON list), where its layout does not say."""

import json
import site

print(json.dumps(site.getsitepackages()))
