"""A base check's contract with the checks deriving from it, enforced when a test is made
(as EESSI's test-suite mixin does) rather than stated in a comment: `required_attributes`
names what a concrete check must define, each a ReFrame parameter, a variable with a
value, or a plain class attribute. ReFrame's own `variable(...)` without a value cannot
serve: a subclass may not turn a base's variable into a parameter (HplCheck's
`layout_name` is one), and an unset variable is found only when something reads it."""
import reframe as rfm
from reframe.core.builtins import run_after
from reframe.core.exceptions import ReframeSyntaxError


class SubclassContract(rfm.RegressionTestPlugin):
    #: {name: what it is}: the attributes a check deriving from this base defines; a base
    #: adds its own to those of the bases it derives from.
    required_attributes = {}

    @run_after('init')
    def enforce_contract(self):
        missing = [name for name in self.required_attributes
                   if getattr(self, name, None) is None]
        if missing:
            said = '; '.join(f'{name} ({self.required_attributes[name]}), which '
                             f'{_declared_by(type(self), name)} requires' for name in missing)
            raise ReframeSyntaxError(f'{type(self).__name__} leaves undefined {said}')


def _declared_by(cls, name):
    """The farthest base of `cls` whose own `required_attributes` names `name`."""
    return next(c.__name__ for c in reversed(cls.__mro__)
                if name in vars(c).get('required_attributes', {}))
