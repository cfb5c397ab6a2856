"""T2K-Tsukuba, University of Tsukuba (2008): the paper's system as site-configs/t2k-tsukuba.yaml describes it."""
from hpcbench.rfm import paper_sites
site_configuration = paper_sites.site_configuration(__file__)
