"""install: the C++ ABI the installed torch was built with (1 or 0), for the flash-attn wheel check."""

import torch  # type: ignore[import-not-found, unused-ignore]

print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
