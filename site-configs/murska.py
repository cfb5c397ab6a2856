"""Murska, HP CP4000 BL XC cluster at CSC (2007): the paper's system as site-configs/murska.yaml describes it."""
from hpcbench.rfm import paper_sites
site_configuration = paper_sites.site_configuration(__file__)
