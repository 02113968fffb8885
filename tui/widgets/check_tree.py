"""CheckTree: the doctor's checks grouped by category, each with its status mark, filling in as
verdicts arrive. A leaf's data is its check id; a category's data is "category:<id>"."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from core.i18n import _
from tui.widgets import status_marks

CATEGORY_PREFIX = "category:"


class CheckTree(Tree[str]):
    # styled in tui/styles/doctor.tcss (the one step that shows it)

    def __init__(self, **kwargs) -> None:
        super().__init__(_("Checks"), **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self._leaves: dict[str, TreeNode[str]] = {}
        self._categories: dict[str, TreeNode[str]] = {}
        self._category_titles: dict[str, str] = {}
        self._titles: dict[str, str] = {}
        self._state: dict[str, str] = {}  # check id -> ok | warn | fail | skip | pending | running

    # building
    def plan(self, rows: list[tuple[str, str, str, str]]) -> None:
        """Show every check to come as pending: rows of (check id, title, category, category title)."""
        self.clear()
        self._leaves.clear()
        self._categories.clear()
        for check_id, title, category, category_title in rows:
            if category not in self._categories:
                self._category_titles[category] = category_title
                self._categories[category] = self.root.add("", data=CATEGORY_PREFIX + category, expand=True)
            self._titles[check_id] = title
            self._state[check_id] = "pending"
            self._leaves[check_id] = self._categories[category].add_leaf("", data=check_id)
            self._relabel(check_id)
        for category in self._categories:
            self._relabel_category(category)

    def set_state(self, check_id: str, state: str, title: str | None = None) -> None:
        if check_id not in self._leaves:
            return
        if title:
            self._titles[check_id] = title
        self._state[check_id] = state
        self._relabel(check_id)
        self._relabel_category(self._category_of(check_id))

    def state(self, check_id: str) -> str | None:
        return self._state.get(check_id)

    def check_ids(self, category: str | None = None) -> list[str]:
        if category is None:
            return list(self._leaves)
        node = self._categories.get(category)
        return [child.data for child in node.children] if node else []

    def select_check(self, check_id: str) -> None:
        node = self._leaves.get(check_id)
        if node is not None:
            node.parent.expand()
            self.move_cursor(node)

    def collapse_not_applicable(self) -> None:
        """Fold the categories whose checks all do not apply (NVIDIA on an AMD box, ...)."""
        for node in self._categories.values():
            if node.children and all(self._state[child.data] == "skip" for child in node.children):
                node.collapse()

    # labels
    def _category_of(self, check_id: str) -> str:
        return self._leaves[check_id].parent.data[len(CATEGORY_PREFIX):]

    def _colour(self, state: str) -> str:
        try:
            return self.app.get_css_variables().get(status_marks.colour(state), "")
        except Exception:  # not mounted yet
            return ""

    def _relabel(self, check_id: str) -> None:
        state = self._state[check_id]
        label = Text.assemble((status_marks.mark(state) + " ", self._colour(state) + " bold"),
                              self._titles[check_id])
        if state == "skip":
            label.stylize(self._colour("skip"))
        self._leaves[check_id].set_label(label)

    def _relabel_category(self, category: str) -> None:
        states = [self._state[child.data] for child in self._categories[category].children]
        label = Text(self._category_titles[category], style="bold")
        for state in ("fail", "warn", "running", "pending"):
            n = states.count(state)
            if n:
                label.append(f"  {status_marks.mark(state)}{n}", style=self._colour(state))
        if "ok" in states and all(s in ("ok", "skip") for s in states):
            label.append(f"  {status_marks.mark('ok')}", style=self._colour("ok"))
        if states and all(s == "skip" for s in states):
            label.append("  " + _("not applicable"), style=self._colour("skip"))
        self._categories[category].set_label(label)
