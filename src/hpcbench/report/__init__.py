"""The report of a system's stored results, rendered from one picture of what it measured
(hpcbench.results.picture): what it shows, as rows (contents), built once into typed
sections and tables (sections), written as a Markdown summary (markdown_summary) and an
HTML page (html_page) by pages; the plots of
measured figures beside the papers' (plots) and over time (trend_plots: drawing what
hpcbench.results.trends judged); headless Chromium
looking at the page as a person would (browser).

May import every layer below it (it reads stored results and runs no check).
"""
