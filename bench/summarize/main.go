// Command summarize renders the summary tables of the benchmark reports from their raw results.
//
// A report (bench/results/<run>/REPORT.md) marks each generated table:
//
//	<!-- summary:begin kind=propagation src=final/push10k/runs.jsonl,final/push100k/runs.jsonl -->
//	| … the table … |
//	<!-- summary:end -->
//
// kind names the table (see renderers), src the raw files it reads (summary.json or runs.jsonl, relative to
// the report's directory, comma-separated), and any other key=value is an option of that kind. The text
// between the markers is the program's output and nothing else.
//
//	go run ./bench/summarize            # print every report's tables
//	go run ./bench/summarize -w         # write them into the reports
//	go run ./bench/summarize -check     # exit 1 when a report's table differs from its raw files
//
// The optional argument is the results directory (default bench/results).
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	write := flag.Bool("w", false, "write the rendered tables into the reports")
	check := flag.Bool("check", false, "exit 1 when a report's tables differ from what its raw files render")
	flag.Parse()
	root := "bench/results"
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	reports, err := findReports(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "summarize:", err)
		os.Exit(2)
	}
	stale := 0
	for _, path := range reports {
		old, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "summarize:", err)
			os.Exit(2)
		}
		updated, tables, err := render(path, string(old))
		if err != nil {
			fmt.Fprintf(os.Stderr, "summarize: %s: %v\n", path, err)
			os.Exit(2)
		}
		switch {
		case *check:
			if updated != string(old) {
				stale++
				fmt.Fprintf(os.Stderr, "%s: a summary table differs from its raw results; run go run ./bench/summarize -w\n", path)
			}
		case *write:
			if updated != string(old) {
				if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
					fmt.Fprintln(os.Stderr, "summarize:", err)
					os.Exit(2)
				}
				fmt.Println("wrote", path)
			}
		default:
			for _, t := range tables {
				fmt.Printf("%s (%s)\n\n%s\n", path, t.spec, t.text)
			}
		}
	}
	if stale > 0 {
		os.Exit(1)
	}
}
