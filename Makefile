.PHONY: run test lint bench
run:   ## benchd run on the embedded default
	bash scripts/run.sh
test:  ## set up, lint, and pass the tests
	bash scripts/test.sh
lint:
	.venv/bin/ruff check benchd tests bench && .venv/bin/mypy
