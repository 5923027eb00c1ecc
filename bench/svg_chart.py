"""Line charts as SVG, with nothing but the standard library (the machine
has no plotting package): series of (x, y) points, solid for what strata
predicts, dashed for what a paper reports, with axes, ticks and a legend."""
import math
from xml.sax.saxutils import escape

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
WIDTH, HEIGHT = 700, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 250, 40, 60


def _ticks(low, high, count=5):
    """Round tick values covering [low, high]."""
    if high <= low:
        high = low + 1
    step = 10 ** math.floor(math.log10((high - low) / count))
    for factor in (1, 2, 5, 10):
        if (high - low) / (step * factor) <= count:
            step *= factor
            break
    first = math.floor(low / step) * step
    return [first + i * step for i in range(int(math.ceil((high - first) / step)) + 1)]


def line_chart(path, title, xlabel, ylabel, series, xlog=False, ymin=None, xnames=None):
    """`series`: a list of (name, points, dashed, colour) with points
    [(x, y)] and colour an index (a prediction and what it is compared
    with share one); x values are placed on a log2 axis when `xlog`, and
    named by `xnames` ({x: label}) where given."""
    xs = [x for _, points, _, _ in series for x, _ in points]
    ys = [y for _, points, _, _ in series for _, y in points]
    fx = (lambda x: math.log2(x)) if xlog else (lambda x: x)
    x0, x1 = fx(min(xs)), fx(max(xs))
    if x1 == x0:
        x1 = x0 + 1
    yt = _ticks(ymin if ymin is not None else min(ys), max(ys))
    y0, y1 = yt[0], yt[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x):
        return LEFT + (fx(x) - x0) / (x1 - x0) * plot_w

    def py(y):
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>']
    for y in yt:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for x in sorted(set(xs)):
        out.append(f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{TOP + plot_h}" y2="{TOP + plot_h + 4}" stroke="black"/>')
        label = xnames.get(x, f"{x:g}") if xnames else f"{x:g}"
        out.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">{escape(label)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 15}" text-anchor="middle">{escape(xlabel)}</text>')
    out.append(f'<text transform="translate(18 {TOP + plot_h / 2}) rotate(-90)" '
               f'text-anchor="middle">{escape(ylabel)}</text>')
    for i, (name, points, dashed, colour_index) in enumerate(series):
        colour = COLOURS[colour_index % len(COLOURS)]
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(points))
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for x, y in points:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        ly = TOP + 10 + 18 * i
        out.append(f'<line x1="{LEFT + plot_w + 12}" x2="{LEFT + plot_w + 36}" y1="{ly}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{LEFT + plot_w + 42}" y="{ly + 4}">{escape(name)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
