"""Shared logic of the benchmark suite: what the ReFrame checks, the site configs and the
bootstrap import (node descriptions, input sizes, reference loading, output parsing)."""
