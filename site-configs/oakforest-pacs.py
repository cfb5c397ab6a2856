"""Oakforest-PACS, JCAHPC (2016): the paper's system as site-configs/oakforest-pacs.yaml describes it."""
from hpcbench.rfm import paper_sites
site_configuration = paper_sites.site_configuration(__file__)
