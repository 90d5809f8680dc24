"""The upgrade rules of EAGLE-3 files: none of their own. Upstream's EAGLE-3 converter has not changed what it
writes since 749f688 apart from the tokenizer's ``add_bos`` / ``add_eos`` (b11223), an item of every file the
driver handles; a current EAGLE-3 file is copied byte for byte.
"""

from ...staleness import UpgradeRules

#: the rules of an ``eagle3`` file
RULES = UpgradeRules()
