"""A paper's system, described in tsubame.yaml (hpcbench.rfm.paper_sites)."""
from hpcbench.rfm import paper_sites
site_configuration = paper_sites.site_configuration(__file__)
