"""ReFrame's deprecated-field warnings without the stack walk where they are ignored
(hpcbench.rfm.deprecation_walk): the same warning, at the same frame, everywhere else."""
import inspect
import warnings

import pytest
from reframe.core import fields
from reframe.core.warnings import (ReframeDeprecationWarning, suppress_deprecations,
                                   user_deprecation_warning)

from hpcbench.rfm import deprecation_walk


class Holder:
    """A class with a deprecated field, as ReFrame's tests have `variables`."""
    value = fields.DeprecatedField(fields.TypedField(int), "'value' is deprecated")


@pytest.fixture
def installed(monkeypatch):
    monkeypatch.setattr(fields, 'user_deprecation_warning', fields.user_deprecation_warning)
    deprecation_walk.install()
    holder = Holder()
    with suppress_deprecations():
        holder.value = 3
    return holder


def _no_walk(*args, **kwargs):
    raise AssertionError('the whole stack was walked')


def test_a_read_the_filters_ignore_walks_no_stack(installed, monkeypatch):
    monkeypatch.setattr(inspect, 'stack', _no_walk)
    with suppress_deprecations():
        assert installed.value == 3
    # ReFrame's own function walks it (the cost this module saves).
    with suppress_deprecations(), pytest.raises(AssertionError, match='walked'):
        user_deprecation_warning("'value' is deprecated")


def test_a_read_outside_the_suppression_warns_at_the_user_s_frame_as_reframe_does(installed):
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter('always')
        installed.value
    with warnings.catch_warnings(record=True) as reframe_s:
        warnings.simplefilter('always')
        user_deprecation_warning("'value' is deprecated")
    (warning,) = ours
    assert warning.category is ReframeDeprecationWarning
    assert str(warning.message) == "'value' is deprecated"
    assert warning.filename == __file__ == reframe_s[0].filename


def test_a_filter_of_some_modules_only_still_gets_its_warning(installed):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        warnings.filterwarnings('ignore', category=ReframeDeprecationWarning,
                                module='elsewhere')
        assert not deprecation_walk.ignored()
        installed.value
    assert [w.category for w in caught] == [ReframeDeprecationWarning]
    with suppress_deprecations():
        assert deprecation_walk.ignored()
