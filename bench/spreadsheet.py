"""Spreadsheet readers at 100k rows: python-calamine, openpyxl (read_only) and pandas (openpyxl engine), on speed
and peak memory, each as a ratio to the baseline measured in the same run: the same rows read from a CSV file by
the csv module (the path convert takes for a CSV). Each reader runs in a fresh process, so peak memory (ru_maxrss)
is its own, Rust allocations included.

    .venv/bin/python bench/spreadsheet.py [ROWS]
"""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READERS = {
    "csv (baseline)": "import csv\nn = sum(1 for _ in csv.reader(open(PATH.replace('.xlsx', '.csv'), encoding='utf-8')))",
    "python-calamine": "from python_calamine import CalamineWorkbook\n"
                       "n = len(CalamineWorkbook.from_path(PATH).get_sheet_by_index(0).to_python())",
    "openpyxl read_only": "import openpyxl\nwb = openpyxl.load_workbook(PATH, read_only=True)\n"
                          "n = sum(1 for _ in wb.worksheets[0].iter_rows(values_only=True))",
    "pandas (openpyxl)": "import pandas\nn = len(pandas.read_excel(PATH, engine='openpyxl')) + 1",
    "pandas (calamine)": "import pandas\nn = len(pandas.read_excel(PATH, engine='calamine')) + 1",
}


def make(folder: Path, rows: int) -> Path:
    import openpyxl

    xlsx = folder / "faq.xlsx"
    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet("FAQ")
    with open(folder / "faq.csv", "w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh)
        for row in [["分类", "问题", "答案"]] + [["物流", f"第 {i} 个问题：我的订单在哪里？",
                                                 f"答案 {i}：请在订单页查看物流信息。"] for i in range(rows)]:
            ws.append(row)
            out.writerow(row)
    wb.save(xlsx)
    return xlsx


def run(code: str, path: Path) -> tuple[float, int, int]:
    prog = (f"import time, resource\nPATH = {str(path)!r}\nt = time.perf_counter()\n{code}\n"
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, n)")
    done = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True)
    secs, rss, n = done.stdout.split()
    return float(secs), int(rss), int(n)


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        path = make(Path(tmp), rows)
        print(f"{rows} rows, {path.stat().st_size / 1e6:.1f} MB xlsx written in {time.perf_counter() - t:.1f} s")
        base = None
        for name, code in READERS.items():
            secs, rss, n = run(code, path)
            base = base or (secs, rss)
            print(f"{name:20s} time x{secs / base[0]:6.1f}   peak memory x{rss / base[1]:5.1f}   ({n} rows)")


if __name__ == "__main__":
    main()
