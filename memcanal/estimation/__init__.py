"""Pure algorithms on guest page-reference streams (numpy, no OpenStack).

A page-reference stream is a 1-D numpy integer array of guest page numbers
in the order the guest touched them.
"""

PAGE_SIZE = 4096
