"""Louhi, Cray XT4 at CSC (2007-2008): the paper's system as site-configs/louhi.yaml describes it."""
from hpcbench.rfm import paper_sites
site_configuration = paper_sites.site_configuration(__file__)
