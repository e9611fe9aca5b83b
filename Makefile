# Two entry points a new user needs: `make demo` and `make test`.
# Each creates .venv on first use and installs what the project needs (torch pinned to the CPU wheel).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup browser demo test lint typecheck clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.deps: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

setup: $(VENV)/.deps

# The console's tests drive Debian's chromium through its own chromedriver (tests never download a
# browser), with CJK fonts so the screenshots they keep show Chinese. Each package is checked, not
# only the driver, and what is missing is installed from Debian's packages (as root, or through
# sudo; the package lists are refreshed when they are too old to have it).
BROWSER_PACKAGES := chromium chromium-driver fonts-noto-cjk
APT_GET := $(if $(filter 0,$(shell id -u)),,sudo )env DEBIAN_FRONTEND=noninteractive apt-get

browser:
	@dpkg -s $(BROWSER_PACKAGES) >/dev/null 2>&1 || \
		$(APT_GET) install -y -q $(BROWSER_PACKAGES) || \
		($(APT_GET) update -q && $(APT_GET) install -y -q $(BROWSER_PACKAGES))

demo: setup
	$(BIN)/mnemo-sea demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: setup
	$(BIN)/mypy -p mnemo_sea

# Both cores: each test file runs whole on one worker, so module fixtures are built once.
test: lint typecheck browser
	$(BIN)/python -m pytest -n 2 --dist loadfile

clean:
	rm -rf $(VENV) build *.egg-info
