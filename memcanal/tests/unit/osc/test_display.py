"""Sizes and curves as the commands show them."""

import json

from memcanal.osc import display

MIB = display.MIB


def test_plot_falls_from_one_to_zero():
    points = [[256 * MIB, 0.5], [512 * MIB, 0.25], [1024 * MIB, 0.0]]
    lines = display.plot(points, width=20, height=4).splitlines()
    # Columns at 0, 54, 108, ... 1024 MiB; from 1.0 at no memory; a row
    # is a quarter of the miss ratio, the middle one labelled.
    assert lines == ['1.0 |***',
                     '    |   **',
                     '0.5 |     *****',
                     '0.0 |          **********',
                     '    +--------------------',
                     '     0       512 1024 MiB']


def test_plot_leaves_out_a_middle_size_that_would_not_fit():
    points = [[256 * MIB, 0.5], [1024 * MIB, 0.0]]
    assert display.plot(points, width=10, height=3).splitlines()[-1] == (
        '     0 1024 MiB')


def test_plot_clamps_ratios_outside_zero_to_one():
    lines = display.plot([[MIB, 1.5], [2 * MIB, -0.5]], width=2,
                         height=2).splitlines()
    assert lines[:2] == ['1.0 |*', '0.0 | *']


def test_preferred_curve():
    assert display.preferred_curve({'shards': [1], 'hcache': [2]}) == (
        'hcache', [2])
    assert display.preferred_curve({'shards': [1]}) == ('shards', [1])
    assert display.preferred_curve({'zeta': [3], 'beta': [4]}) == (
        'beta', [4])
    assert display.preferred_curve({}) == (None, None)
    assert display.preferred_curve(None) == (None, None)


def test_curve_column_charts_for_tables_and_is_raw_otherwise():
    mrc = {'shards': [[MIB, 0.5], [2 * MIB, 0.0]]}
    column = display.CurveColumn(mrc)
    assert column.machine_readable() == mrc
    assert column.human_readable().startswith(
        'miss ratio by memory (shards):\n1.0 |')
    assert display.CurveColumn({}).human_readable() == ''


def test_sizes_in_mib():
    assert display.mib(None) is None
    assert display.mib(3 * MIB) == 3
    assert display.mib_by_key({'prl': 2 * MIB}) == {'prl': 2}
    assert display.mib_by_key(None) == {}


def test_sizes_column_shows_plain_numbers():
    column = display.SizesColumn({'prl': 512, 'esx': 420})
    assert column.human_readable() == 'esx=420, prl=512'
    assert column.machine_readable() == {'prl': 512, 'esx': 420}
    assert display.SizesColumn({}).human_readable() == ''


def test_json_column():
    column = display.JSONColumn({'b': 1, 'a': [2]})
    assert column.human_readable() == '{\n "a": [\n  2\n ],\n "b": 1\n}'
    assert column.machine_readable() == {'b': 1, 'a': [2]}


def test_json_column_abridges_curves_in_tables():
    inputs = {'instances': {'vm': {'mrc': [[MIB, 0.5], [2 * MIB, 0.0]],
                                   'wss_bytes': MIB}},
              'hosts': [{'mrc': [[MIB, 1.0]]}]}
    column = display.JSONColumn(inputs)
    assert json.loads(column.human_readable()) == {
        'instances': {'vm': {'mrc': '2-point curve', 'wss_bytes': MIB}},
        'hosts': [{'mrc': '1-point curve'}]}
    assert column.machine_readable() == inputs


def test_plot_shades_a_band_between_its_edges():
    points = [[256 * MIB, 0.5], [512 * MIB, 0.25], [1024 * MIB, 0.0]]
    band = {'low': [[256 * MIB, 0.25], [512 * MIB, 0.0], [1024 * MIB, 0.0]],
            'high': [[256 * MIB, 0.75], [512 * MIB, 0.5],
                     [1024 * MIB, 0.25]]}
    lines = display.plot(points, width=20, height=4, band=band).splitlines()
    # Both edges start, as the curve does, at 1.0 with no memory.
    assert lines[:4] == ['1.0 |***..',
                         '    |  .**.....',
                         '0.5 |    .*****.........',
                         '0.0 |     .....**********']
    # Without one, the chart is as before.
    assert display.plot(points, width=20, height=4).splitlines()[0] == (
        '1.0 |***')


def test_intervals_show_as_low_to_high_mib():
    assert display.interval_mib([180 * MIB, 230 * MIB]) == [180, 230]
    assert display.interval_mib(None) is None
    column = display.IntervalColumn([180, 230])
    assert (column.human_readable(), column.machine_readable()) == (
        '180..230', [180, 230])
    assert display.IntervalColumn(None).human_readable() == ''
    by_name = display.IntervalsColumn({'sampled': [180, 230], 'esx': None})
    assert by_name.human_readable() == 'esx=, sampled=180..230'


def test_a_curve_is_charted_with_its_band_and_the_band_summed_up():
    mrc = {'sampled': [[256 * MIB, 0.5], [1024 * MIB, 0.0]]}
    bands = {'sampled': {'low': [[256 * MIB, 0.4], [1024 * MIB, 0.0]],
                         'high': [[256 * MIB, 0.7], [1024 * MIB, 0.1]]}}
    curve = display.CurveColumn(mrc, bands)
    assert curve.human_readable().startswith(
        'miss ratio by memory (sampled, 95 % band: .):\n')
    assert '.' in curve.human_readable().split('\n', 1)[1]
    assert curve.machine_readable() == mrc
    assert display.CurveColumn(mrc).human_readable().startswith(
        'miss ratio by memory (sampled):\n')
    band = display.BandColumn(bands)
    assert band.human_readable() == 'sampled: widest 0.300 at 256 MiB'
    assert band.machine_readable() == bands
