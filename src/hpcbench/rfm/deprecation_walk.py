"""ReFrame 4.10.4 spends most of a run's time finding who read a deprecated field, then
dropping the warning: its logger reads every loggable variable of a test for each log
record (reframe.core.logging, _update_check_extras), the deprecated alias `variables` of
`env_vars` among them, inside suppress_deprecations(); each read walks the whole stack with
inspect.stack() (every frame's module and source line) to place a warning the filters then
ignore. Profiled here, a dry run of TSUBAME's 840 test cases spent 400 of its 544 s in
those walks (21,758 of them).

`install` makes ReFrame's fields warn through `warn_unless_ignored`: nothing where the
warnings filters ignore a ReFrame deprecation warning anyway (the first filter that applies
to its category is an unconditional `ignore`: what suppress_deprecations() sets); anywhere
else the same warning, at the same frame ReFrame names (the first outside ReFrame), found
by following frame links rather than by reading every frame's source."""
import sys
import warnings

import reframe
import semver
from reframe.core import fields
from reframe.core.warnings import ReframeDeprecationWarning


def ignored(category=ReframeDeprecationWarning):
    """Whether the warnings filters in force ignore every warning of `category`, whatever
    its message, module or line (the first filter that applies decides)."""
    for action, message, filtered, module, lineno in warnings.filters:
        if not issubclass(category, filtered):
            continue
        # A filter of some messages, modules or lines: the warning's frame decides.
        return action == 'ignore' and message is None and module is None and not lineno
    return False


def _due(from_version):
    """ReFrame's rule: a deprecation scheduled from `from_version` is said from that version
    on (a prerelease counts as its release)."""
    version = semver.VersionInfo.parse(reframe.VERSION)
    version = semver.VersionInfo(version.major, version.minor, version.patch)
    return version >= semver.VersionInfo.parse(from_version)


def warn_unless_ignored(message, from_version='0.0.0'):
    if ignored() or not _due(from_version):
        return
    # The first frame outside ReFrame (and this module) is the user's, as ReFrame finds it.
    level, frame = 1, sys._getframe(0)
    while frame is not None and (frame.f_globals.get('__name__', '') == __name__ or
                                 frame.f_globals.get('__name__', '').startswith('reframe')):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, ReframeDeprecationWarning, stacklevel=level)


def install():
    """Route ReFrame's deprecated-field warnings through warn_unless_ignored (idempotent)."""
    fields.user_deprecation_warning = warn_unless_ignored
