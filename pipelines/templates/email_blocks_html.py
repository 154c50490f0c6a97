"""A validated json_structure → email-client-safe HTML (merge tags left in for send time).

Layout is nested presentation tables with inline styles only (Outlook's Word engine and
Gmail ignore most of the rest); colours also go in `bgcolor` attributes so buttons and
panels keep their colour where CSS is stripped; images are `display:block` with alt text;
buttons are table cells with a link filling them. Text from the document is escaped;
the rich-HTML of text and html blocks goes through pipelines/templates/html_sanitize.py."""

from __future__ import annotations

from html import escape

from pipelines.templates.html_sanitize import safe_url, sanitize_html

DEFAULTS = {"fontFamily": "Arial, Helvetica, sans-serif", "contentWidth": 600,
            "backgroundColor": "#f4f4f5", "contentBackgroundColor": "#ffffff", "defaultTextColor": "#111827"}
PAD = 24  # px of horizontal padding around each block
HEADER_SIZES = {1: 32, 2: 24, 3: 20}
TABLE = 'role="presentation" cellpadding="0" cellspacing="0" border="0"'


def _a(value) -> str:
    """An attribute value or text, escaped (merge-tag braces pass through unchanged)."""
    return escape(str(value), quote=True)


def _css_url(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in "'\"()\\ \t\n" else c for c in value)


def _num(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class _Renderer:
    def __init__(self, settings: dict):
        self.s = {**DEFAULTS, **(settings or {})}
        self.font = _a(self.s["fontFamily"])

    def row(self, inner: str, *, align: str = "left", padding: str = f"12px {PAD}px", style: str = "") -> str:
        return (f'<tr><td align="{align}" style="padding:{padding};font-family:{self.font};'
                f'color:{_a(self.s["defaultTextColor"])};{style}">{inner}</td></tr>')

    def stack(self, blocks: list, width: float) -> str:
        rows = "".join(self.block(b, width) for b in blocks)
        return f'<table {TABLE} width="100%" style="border-collapse:collapse;">{rows}</table>'

    def block(self, block: dict, width: float) -> str:
        content = block.get("content") or {}
        return getattr(self, "b_" + block["type"])(content, width)

    # --- the common blocks ---------------------------------------------------------------
    def b_header(self, c, width):
        level = c.get("level", 1)
        color = _a(c.get("color", self.s["defaultTextColor"]))
        align = c.get("alignment", "left")
        return self.row(f'<h{level} style="margin:0;font-family:{self.font};font-size:{HEADER_SIZES[level]}px;'
                        f'line-height:1.25;font-weight:bold;color:{color};text-align:{align};">'
                        f'{_a(c.get("text", ""))}</h{level}>', align=align)

    def b_text(self, c, width):
        align = c.get("alignment", "left")
        color = _a(c.get("color", self.s["defaultTextColor"]))
        return self.row(f'<div style="font-family:{self.font};font-size:16px;line-height:1.5;color:{color};'
                        f'text-align:{align};">{sanitize_html(c.get("html", ""))}</div>', align=align)

    def button(self, text: str, url: str, *, align: str, bg: str, fg: str, radius, full: bool) -> str:
        table_width = ' width="100%"' if full else ""
        display = "block" if full else "inline-block"
        return (f'<table {TABLE}{table_width} align="{align}" style="border-collapse:separate;margin:0 auto;">'
                f'<tr><td align="center" bgcolor="{_a(bg)}" style="border-radius:{_num(radius)}px;'
                f'background-color:{_a(bg)};">'
                f'<a href="{_a(safe_url(url))}" target="_blank" style="display:{display};padding:12px 24px;'
                f'font-family:{self.font};font-size:16px;font-weight:bold;line-height:20px;color:{_a(fg)};'
                f'text-decoration:none;border-radius:{_num(radius)}px;">{_a(text)}</a></td></tr></table>')

    def b_button(self, c, width):
        align = c.get("alignment", "center")
        return self.row(self.button(c.get("text", "Click here"), c.get("url", "#"), align=align,
                                    bg=c.get("backgroundColor", "#2563eb"), fg=c.get("textColor", "#ffffff"),
                                    radius=c.get("borderRadius", 6), full=c.get("fullWidth", False)), align=align)

    def image(self, src, alt, width_px, *, extra: str = "") -> str:
        width_attr = f' width="{int(width_px)}"' if width_px else ""
        max_css = f"{int(width_px)}px" if width_px else "100%"
        return (f'<img src="{_a(safe_url(src))}" alt="{_a(alt)}"{width_attr} style="display:block;border:0;'
                f'outline:none;text-decoration:none;height:auto;width:100%;max-width:{max_css};{extra}">')

    def b_image(self, c, width):
        requested = c.get("width", "auto")
        inner_width = width - 2 * PAD
        px = inner_width if requested == "full" else (min(requested, inner_width) if requested != "auto" else None)
        img = self.image(c.get("src", ""), c.get("alt", ""), px)
        if c.get("url"):
            img = f'<a href="{_a(safe_url(c["url"]))}" target="_blank">{img}</a>'
        align = c.get("alignment", "center")
        return self.row(f'<table {TABLE} align="{align}"><tr><td>{img}</td></tr></table>', align=align)

    def b_divider(self, c, width):
        line = (f'border-top:{_num(c.get("thickness", 1))}px {c.get("style", "solid")} '
                f'{_a(c.get("color", "#e5e7eb"))};')
        return self.row(f'<table {TABLE} width="{_num(c.get("width", 100))}%" align="center">'
                        f'<tr><td style="{line}font-size:0;line-height:0;height:0;">&nbsp;</td></tr></table>',
                        align="center")

    def b_spacer(self, c, width):
        h = _num(c.get("height", 24))
        return f'<tr><td style="height:{h}px;line-height:{h}px;font-size:0;">&nbsp;</td></tr>'

    def b_html(self, c, width):
        return self.row(sanitize_html(c.get("html", "")))

    # --- the blocks whose content shape we define (docs/templates.md, json_structure) ---
    def b_columns(self, c, width):
        columns = c.get("columns") or []
        gap = c.get("gap", 16)
        even = 100 / max(len(columns), 1)
        cells = []
        for column in columns:
            share = column.get("width", even)
            cells.append(f'<td valign="top" width="{_num(round(share, 2))}%" style="width:{_num(round(share, 2))}%;'
                         f'padding:0 {_num(gap / 2)}px;">'
                         f'{self.stack(column.get("blocks", []), width * share / 100 + 2 * PAD)}</td>')
        return self.row(f'<table {TABLE} width="100%"><tr>{"".join(cells)}</tr></table>',
                        padding=f"12px {max(PAD - gap / 2, 0):g}px")

    def b_social(self, c, width):
        size = c.get("iconSize", 24)
        color = _a(c.get("color", "#2563eb"))
        cells = []
        for entry in c.get("networks") or []:
            label = entry.get("label") or entry.get("network", "link").capitalize()
            if entry.get("iconUrl"):
                inner = (f'<img src="{_a(safe_url(entry["iconUrl"]))}" alt="{_a(label)}" width="{int(size)}" '
                         f'height="{int(size)}" style="display:block;border:0;">')
            else:
                inner = _a(label)
            cells.append(f'<td style="padding:0 6px;font-family:{self.font};font-size:14px;">'
                         f'<a href="{_a(safe_url(entry.get("url", "#")))}" target="_blank" '
                         f'style="color:{color};text-decoration:none;">{inner}</a></td>')
        align = c.get("alignment", "center")
        return self.row(f'<table {TABLE} align="{align}"><tr>{"".join(cells)}</tr></table>', align=align)

    def b_dynamic(self, c, width):
        """One row per item of a template_data list, filled at send time by {{#each}}."""
        f = {k: c.get(f"{k}Field", k) for k in ("title", "image", "url", "description", "price")}
        align = c.get("alignment", "left")
        item = (f'{{{{#if this.{f["image"]}}}}}'
                + self.image(f'{{{{this.{f["image"]}}}}}', f'{{{{this.{f["title"]}}}}}', None,
                             extra="margin-bottom:8px;")
                + "{{/if}}"
                f'<p style="margin:0 0 4px;font-family:{self.font};font-size:18px;font-weight:bold;">'
                f'{{{{this.{f["title"]}}}}}</p>'
                f'{{{{#if this.{f["description"]}}}}}<p style="margin:0 0 4px;font-family:{self.font};'
                f'font-size:14px;line-height:1.5;">{{{{this.{f["description"]}}}}}</p>{{{{/if}}}}'
                f'{{{{#if this.{f["price"]}}}}}<p style="margin:0 0 8px;font-family:{self.font};font-size:16px;'
                f'font-weight:bold;">{{{{this.{f["price"]}}}}}</p>{{{{/if}}}}'
                f'{{{{#if this.{f["url"]}}}}}'
                + self.button(c.get("buttonText", "View"), f'{{{{this.{f["url"]}}}}}', align=align,
                              bg="#2563eb", fg="#ffffff", radius=6, full=False)
                + "{{/if}}")
        empty = self.row(_a(c["emptyText"]), align=align) if c.get("emptyText") else ""
        return (f'{{{{#each {c["source"].strip()}}}}}' + self.row(item, align=align)
                + "{{else}}" + empty + "{{/each}}")

    def b_conditional(self, c, width):
        """Rows shown when `condition` (merge-tag syntax, e.g. plan == 'pro') holds."""
        rows = "".join(self.block(b, width) for b in c.get("blocks") or [])
        other = "".join(self.block(b, width) for b in c.get("elseBlocks") or [])
        return f'{{{{#if {c["condition"].strip()}}}}}{rows}{{{{else}}}}{other}{{{{/if}}}}'

    def b_hero(self, c, width):
        bg = _a(c.get("backgroundColor", "#111827"))
        fg = _a(c.get("textColor", "#ffffff"))
        align = c.get("alignment", "center")
        image = c.get("backgroundImage")
        image_attr = f' background="{_a(safe_url(image))}"' if image else ""
        image_css = (f"background-image:url('{_a(_css_url(safe_url(image)))}');background-size:cover;"
                     "background-position:center;") if image else ""
        height = f"height:{_num(c['height'])}px;" if c.get("height") else ""
        inner = (f'<h1 style="margin:0 0 12px;font-family:{self.font};font-size:36px;line-height:1.2;'
                 f'color:{fg};">{_a(c.get("title", ""))}</h1>')
        if c.get("subtitle"):
            inner += (f'<p style="margin:0 0 20px;font-family:{self.font};font-size:18px;line-height:1.5;'
                      f'color:{fg};">{_a(c["subtitle"])}</p>')
        if c.get("buttonText") and c.get("buttonUrl"):
            inner += self.button(c["buttonText"], c["buttonUrl"], align=align,
                                 bg=c.get("buttonColor", "#ffffff"), fg=c.get("buttonTextColor", "#111827"),
                                 radius=6, full=False)
        return (f'<tr><td align="{align}" bgcolor="{bg}"{image_attr} style="background-color:{bg};{image_css}'
                f'padding:48px {PAD}px;{height}text-align:{align};font-family:{self.font};color:{fg};">'
                f'{inner}</td></tr>')

    def b_profile(self, c, width):
        """A person card: round photo beside name, role and a short bio."""
        photo = ""
        if c.get("imageUrl"):
            photo = ('<td valign="top" width="72" style="padding-right:16px;">'
                     + self.image(c["imageUrl"], c.get("name", ""), 72, extra="border-radius:36px;")
                     + "</td>")
        name = _a(c.get("name", ""))
        if c.get("url"):
            name = f'<a href="{_a(safe_url(c["url"]))}" style="color:inherit;text-decoration:none;">{name}</a>'
        text = (f'<p style="margin:0;font-family:{self.font};font-size:18px;font-weight:bold;">{name}</p>'
                f'<p style="margin:0 0 6px;font-family:{self.font};font-size:14px;color:#6b7280;">'
                f'{_a(c.get("role", ""))}</p>'
                f'<p style="margin:0;font-family:{self.font};font-size:14px;line-height:1.5;">'
                f'{_a(c.get("bio", ""))}</p>')
        align = c.get("alignment", "left")
        return self.row(f'<table {TABLE} align="{align}"><tr>{photo}<td valign="top">{text}</td></tr></table>',
                        align=align)

    def b_dropshadow(self, c, width):
        """Nested blocks on a raised panel; where box-shadow is unsupported a border remains."""
        bg = _a(c.get("backgroundColor", "#ffffff"))
        shadow = (f'{_num(c.get("offsetX", 0))}px {_num(c.get("offsetY", 4))}px {_num(c.get("blur", 12))}px '
                  f'{_a(c.get("shadowColor", "#d1d5db"))}')
        radius, pad = _num(c.get("borderRadius", 8)), c.get("padding", 0)
        inner = self.stack(c.get("blocks") or [], width - 2 * PAD - 2 * pad)
        return self.row(f'<table {TABLE} width="100%" style="border-collapse:separate;"><tr>'
                        f'<td bgcolor="{bg}" style="background-color:{bg};border:1px solid '
                        f'{_a(c.get("borderColor", "#e5e7eb"))};border-radius:{radius}px;box-shadow:{shadow};'
                        f'padding:{_num(pad)}px;">{inner}</td></tr></table>')


def render_structure(structure: dict) -> str:
    """The whole email document for a json_structure already checked by validate_structure."""
    r = _Renderer(structure.get("settings") or {})
    width = r.s["contentWidth"]
    rows = "".join(r.block(b, width) for b in structure.get("blocks") or [])
    bg, content_bg = _a(r.s["backgroundColor"]), _a(r.s["contentBackgroundColor"])
    return ('<!DOCTYPE html>\n<html lang="en" xmlns="http://www.w3.org/1999/xhtml"><head>'
            '<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
            '<meta name="x-apple-disable-message-reformatting"><title></title></head>'
            f'<body style="margin:0;padding:0;background-color:{bg};">'
            f'<table {TABLE} width="100%" bgcolor="{bg}" style="background-color:{bg};border-collapse:collapse;">'
            '<tr><td align="center" style="padding:24px 0;">'
            f'<table {TABLE} width="{_num(width)}" bgcolor="{content_bg}" style="width:100%;max-width:{_num(width)}px;'
            f'background-color:{content_bg};border-collapse:collapse;">{rows}</table>'
            '</td></tr></table></body></html>\n')
