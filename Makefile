# Thin aliases over the commands the README shows.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint docs golden completion bench prove fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,docs]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/verl-setup detect
	$(BIN)/verl-setup plan --explain

# Two passes: the tests that need the machine to themselves (a Ray head's GCS misses its start-up
# deadline when a Docker build shares two cores with it), then the rest in parallel. The serial
# pass goes first because its Docker build needs the most disk at once (about 13 GB for the cpu
# row's image), and the parallel pass leaves a large uv cache behind.
test: $(STAMP)
	$(BIN)/python -m pytest -m serial
	$(BIN)/python -m pytest -n 4 -m "not serial"

# Hypothesis over every parser and CLI boundary (tests/unit/test_fuzz.py): FUZZ_EXAMPLES random
# inputs per target (9 targets: parsers, files, plan and render flags as --opt VALUE and
# --opt=VALUE, hostile rows files rendered to every target), each a crash, a hang (> 5 s) or a
# multi-line error if it fails.
# `make test` runs the same file as a small fixed-seed slice.
FUZZ_EXAMPLES ?= 2000
fuzz: $(STAMP)
	VERL_SETUP_FUZZ_PROFILE=fuzz VERL_SETUP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) \
	  $(BIN)/python -m pytest tests/unit/test_fuzz.py -q -p no:cacheprovider --hypothesis-show-statistics

lint: $(STAMP)
	$(BIN)/ruff check installer tests bench tasks
	$(BIN)/ruff format --check installer tests bench tasks
	$(BIN)/mypy

# The docs site into build/site: the generated pages first (tasks/gen_docs.py: the CLI reference
# from the parser, the schemas, the matrix page and its selector grid from the real plan code),
# then mkdocs-material with --strict (a broken link or a page left out of nav fails).
docs: $(STAMP)
	$(BIN)/python tasks/gen_docs.py
	$(BIN)/mkdocs build --strict --quiet

# Real installs plus the import probe, row by row (every row, or ROW="id ..."); records
# matrices/proof.yaml. About a minute per row with a warm uv cache, 5-10 GB of disk per row.
prove: $(STAMP)
	$(BIN)/verl-setup matrix prove $(ROW)

golden: $(STAMP)
	VERL_SETUP_REGEN_GOLDEN=1 $(BIN)/python -m pytest tests/unit/test_render.py -q -k golden

# The shell completion scripts, from the parser, into the package (committed; a test compares them
# with what the parser gives now, so run this after changing a command or a flag).
completion: $(STAMP)
	$(BIN)/python tasks/gen_completion.py

bench: $(STAMP)
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/install.py
	$(BIN)/python bench/diagnose.py --gib 1
	$(BIN)/python bench/cluster.py

clean:
	rm -rf $(VENV) build dist site .pytest_cache .mypy_cache .ruff_cache
