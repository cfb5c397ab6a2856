#!/usr/bin/env python3
"""Benchmark analysis (not a test): what each check's repeats within one job buy, from a
run report of ReFrame (`<var>/reports/run-report-0.json`).

Every passing test case that recorded its repeats (`samples`: HPL's solves and DGEMM calls,
STREAM's rounds, IOR's repeats, IMB's launches, ...) is read; per check and figure it
prints how far apart the repeats of one job lay, (max - min) / median, and how far the
first repeat alone lay from the figure the case reported (its best, median or mean over
the repeats): what a job of one repeat would have reported instead. Figures that repeat
exactly (a model's bound) and those of the repeats' spread itself (a coefficient of
variation) are left out.

    .venv/bin/python perf/repeats_worth.py var/make-run-warm/reports/run-report-0.json
"""
import argparse
import collections
import json
import statistics
import sys


def repeat_rows(report):
    """{(check, figure, repeats): [(spread %, first repeat's distance %), ...]}."""
    rows = collections.defaultdict(list)
    for run in report['runs']:
        for case in run['testcases']:
            if case['result'] != 'pass' or not case.get('samples'):
                continue
            reported = {name.rsplit(':', 1)[-1]: value[0]
                        for name, value in (case.get('perfvalues') or {}).items()}
            for figure, samples in case['samples'].items():
                values = [v for v in samples if isinstance(v, (int, float))]
                figure_value = reported.get(figure)
                if len(values) < 2 or not figure_value or len(set(values)) == 1 \
                        or figure.endswith('_cv'):
                    continue
                middle = statistics.median(values)
                rows[(case['name'].split()[0], figure, len(values))].append((
                    (max(values) - min(values)) / abs(middle) * 100,
                    abs(values[0] - figure_value) / abs(figure_value) * 100))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('report', help="a ReFrame run report (JSON)")
    args = parser.parse_args()
    try:
        with open(args.report) as handle:
            rows = repeat_rows(json.load(handle))
    except (OSError, ValueError, KeyError) as err:
        sys.exit(f'{args.report}: not a ReFrame run report ({err})')
    print(f'{"check":<16} {"figure":<30} {"repeats":>7} {"cases":>5} '
          f'{"spread median / max":>20} {"first alone off by median / max":>32}')
    for (check, figure, repeats), values in sorted(rows.items()):
        spreads, firsts = zip(*values)
        print(f'{check:<16} {figure:<30} {repeats:>7} {len(values):>5} '
              f'{statistics.median(spreads):>11.1f} / {max(spreads):>5.1f} %'
              f'{statistics.median(firsts):>23.1f} / {max(firsts):>5.1f} %')


if __name__ == '__main__':
    main()
