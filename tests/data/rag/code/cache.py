"""A tiny least-recently-used cache."""

from collections import OrderedDict


class LRUCache:
    """Keeps at most `capacity` items; the least recently used one is evicted first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: OrderedDict = OrderedDict()

    def get(self, key):
        if key not in self.items:
            return None
        self.items.move_to_end(key)
        return self.items[key]

    def put(self, key, value) -> None:
        self.items[key] = value
        self.items.move_to_end(key)

        if len(self.items) > self.capacity:
            self.items.popitem(last=False)


def fibonacci(n: int) -> int:
    """The n-th Fibonacci number, iteratively."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
