"""INI editing for devstack_stubs.sh, as devstack's inc/ini-config does
it: line by line, so an option may repeat (nova's available_filters),
which configparser cannot write.

    devstack_ini.py get FILE SECTION OPTION        every value, one a line
    devstack_ini.py set FILE SECTION OPTION VALUE...   the option's values
"""

import os
import re
import sys

_HEADER = re.compile(r'\s*\[(?P<name>[^]]+)\]\s*$')


def _section(lines, section):
    """The [start, end) of the section's body, or None without it."""
    start = None
    for index, line in enumerate(lines):
        header = _HEADER.match(line)
        if header and start is not None:
            return start, index
        if header and header.group('name') == section:
            start = index + 1
    return None if start is None else (start, len(lines))


def _is_option(line, option):
    return re.match(r'\s*%s\s*=' % re.escape(option), line) is not None


def _read(path):
    if not os.path.exists(path):
        return []
    with open(path) as ini:
        return ini.read().splitlines()


def get(path, section, option):
    lines = _read(path)
    bounds = _section(lines, section)
    if bounds is None:
        return []
    return [line.split('=', 1)[1].strip()
            for line in lines[slice(*bounds)] if _is_option(line, option)]


def set_values(path, section, option, values):
    """Replace every line of the option by one per value, where its first
    line was (right under the header when it had none)."""
    lines = _read(path)
    bounds = _section(lines, section)
    if bounds is None:
        lines.extend(([''] if lines else []) + ['[%s]' % section])
        bounds = (len(lines), len(lines))
    start, end = bounds
    body = lines[start:end]
    first = next((index for index, line in enumerate(body)
                  if _is_option(line, option)), 0)
    kept = [line for line in body if not _is_option(line, option)]
    kept[first:first] = ['%s = %s' % (option, value) for value in values]
    lines[start:end] = kept
    with open(path, 'w') as ini:
        ini.write('\n'.join(lines) + '\n')


def main(argv):
    command, path, section, option, *values = argv
    if command == 'get':
        for value in get(path, section, option):
            print(value)
    else:
        set_values(path, section, option, values)


if __name__ == '__main__':
    main(sys.argv[1:])
