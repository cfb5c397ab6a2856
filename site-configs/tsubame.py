"""TSUBAME grid, Tokyo Institute of Technology (2006): the paper's system as site-configs/tsubame.yaml describes it."""
from hpcbench.rfm import paper_sites
site_configuration = paper_sites.site_configuration(__file__)
