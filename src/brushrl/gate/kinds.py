"""What a JavaScript value can be, as the static gate tracks it (:class:`Kind`).

Its own module because both the value tracker (``values``) and the member policy
(``policy.classify_member``) read it, and ``values`` reads the policy's tables: with ``Kind`` in
``values`` the two modules imported each other (issue 37).
"""

from __future__ import annotations

from enum import Enum


class Kind(Enum):
    P5 = "a p5 object"
    WINDOW = "`this` (can be the global object)"
    BRUSH = "brush"
    OWN = "an object the sketch built"
    NAMESPACE = "an ECMAScript built-in"
    FUNCTION = "a function the sketch declares"
    OTHER = "a value"
