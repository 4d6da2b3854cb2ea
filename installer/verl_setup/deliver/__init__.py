"""The rendered files delivered into a folder, with what must run to make them: `uv lock` for the
uv project (render/ writes text and runs nothing; environment/ below it cannot import render/)."""
