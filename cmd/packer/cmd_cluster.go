package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/packer-dev/packer/scripts/k8s"
	"github.com/packer-dev/packer/scripts/slurm"
)

// newClusterCommand is `packer cluster`: the Slurm scripts and Kubernetes manifests of a build
// in parts (scripts/slurm, scripts/k8s), embedded in the binary so that a user of the release
// binary or the wheel has them without a checkout.
func newClusterCommand(io *iostreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:                        "cluster slurm|k8s",
		Short:                      "Print the Slurm scripts or Kubernetes manifests of a build in parts",
		SuggestionsMinimumDistance: 2,
		Long: `Cluster prints what a build in parts needs on a cluster, from copies held in the binary
(the same bytes as scripts/slurm and scripts/k8s of the packer repository, so no checkout is
needed):

  packer cluster slurm -o DIR              the Slurm scripts, written into DIR
  packer cluster slurm FILE                one of them on standard output
  packer cluster k8s pvc|parts|merge ...   a Kubernetes manifest, rendered from flags

See docs/cluster.md.
` + exitStatusHelp,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return unknownCommand(c, args[0])
		},
		RunE: func(c *cobra.Command, args []string) error { return c.Help() },
	}
	cmd.AddCommand(newClusterSlurmCommand(io), newClusterK8sCommand(io))
	return cmd
}

// slurmFiles are the files of scripts/slurm, in the order they are listed, with what each is.
var slurmFiles = []struct{ name, what string }{
	{"submit.sh", "submits the parts as a job array and the merge after them: submit.sh SRC OUT N [build flags]"},
	{"build-parts.sbatch", "one array task: builds part SLURM_ARRAY_TASK_ID of PACKER_PARTS"},
	{"merge.sbatch", "the merge job: joins PACKER_PARTS_DIR/part-* into PACKER_OUT"},
}

func newClusterSlurmCommand(io *iostreams) *cobra.Command {
	var dir string
	var force bool
	var list strings.Builder
	for _, f := range slurmFiles {
		fmt.Fprintf(&list, "  %-19s %s\n", f.name, f.what)
	}
	cmd := &cobra.Command{
		Use:   "slurm [FILE] [-o DIR]",
		Short: "Print or write the Slurm scripts of a build in parts",
		Long: `Slurm prints one of the Slurm scripts of a build in parts, or writes all three into a folder
(mode 0755; an existing file is replaced only with --force):

` + list.String() + `
  packer cluster slurm -o slurm && slurm/submit.sh /data/train /shared/in224 64 --resize 256 --crop 224
  packer cluster slurm build-parts.sbatch > build-parts.sbatch

The jobs run PACKER (default: the packer on PATH when submit.sh runs). See docs/cluster.md.
` + exitStatusHelp,
		Args: argsUsage(cobra.MaximumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && dir != "":
				return usagef(errors.New("give FILE (printed) or -o DIR (all files written), not both"))
			case len(args) == 1:
				data, err := slurmFile(args[0])
				if err != nil {
					return err
				}
				_, err = io.Out.Write(data)
				return err
			case dir != "":
				return writeSlurm(io, dir, force)
			}
			return usagef(fmt.Errorf("give a FILE to print or -o DIR to write them all; the files:\n%s", strings.TrimRight(list.String(), "\n")))
		},
	}
	cmd.Flags().StringVarP(&dir, "out", "o", "", "write every script into this folder (created if missing)")
	cmd.Flags().BoolVar(&force, "force", false, "with -o: replace scripts already in the folder")
	return cmd
}

// slurmFile is the embedded script name, or a usage error naming the files.
func slurmFile(name string) ([]byte, error) {
	for _, f := range slurmFiles {
		if f.name == name {
			return fs.ReadFile(slurm.Files, name)
		}
	}
	names := make([]string, len(slurmFiles))
	for i, f := range slurmFiles {
		names[i] = f.name
	}
	return nil, usagef(fmt.Errorf("%s: no such Slurm script; the scripts are %s", name, strings.Join(names, ", ")))
}

// writeSlurm writes every Slurm script into dir, executable, refusing to replace one unless force.
func writeSlurm(io *iostreams, dir string, force bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if !force {
		for _, f := range slurmFiles {
			p := filepath.Join(dir, f.name)
			if _, err := os.Lstat(p); err == nil {
				return usagef(fmt.Errorf("%s exists (use --force to replace the scripts)", p))
			}
		}
	}
	for _, f := range slurmFiles {
		data, err := fs.ReadFile(slurm.Files, f.name)
		if err != nil {
			return err
		}
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, data, 0o755); err != nil {
			return err
		}
		// WriteFile keeps the mode of a file it replaces, and the umask narrows a new one.
		if err := os.Chmod(p, 0o755); err != nil {
			return err
		}
	}
	fmt.Fprintf(io.Out, "wrote %s/{submit.sh,build-parts.sbatch,merge.sbatch}; next: %s SRC OUT N [build flags]\n", dir, filepath.Join(dir, "submit.sh"))
	return nil
}

// k8sValues are the values of a rendering, which render.sh takes from PACKER_* variables (each
// flag's help names its variable).
type k8sValues struct {
	name, outClaim, storageClass, outSize, image, parts, parallelism, retries string
	cpu, memory, mergeMemory, src, srcClaim, buildArgs                        string
	noPlan                                                                    bool // PACKER_PLAN=0: the parts read the source, no plan Job
}

// k8sTemplates maps render.sh's WHAT to its template.
var k8sTemplates = map[string]string{"pvc": "output-pvc.yaml", "plan": "plan-job.yaml", "parts": "parts-job.yaml", "merge": "merge-job.yaml"}

func newClusterK8sCommand(io *iostreams) *cobra.Command {
	var v k8sValues
	cmd := &cobra.Command{
		Use:   "k8s pvc|plan|parts|merge [flags]",
		Short: "Print a Kubernetes manifest of a build in parts",
		Long: `K8s prints one Kubernetes manifest of a build in parts, for kubectl apply -f -, filled in from
the flags exactly as scripts/k8s/render.sh fills it from its PACKER_* variables (--parts is
PACKER_PARTS, --src-claim PACKER_SRC_CLAIM, and so on): the same values give the same bytes.

  pvc     the output volume (ReadWriteMany): --name, --storage-class, --out-size
  plan    the Job that lists the source once into /out/NAME.plan (packer plan, with those of
          --build-args that plan takes): --name, --image, --src (under /data), --src-claim
  parts   the Indexed Job of the parts, built from /out/NAME.plan: --name, --image, --parts,
          --src-claim; the part count goes into both the Job's completions and PACKER_PARTS;
          with --no-plan built from --src itself (each pod lists it), and no plan Job
  merge   the merge Job: --name, --image, --parts

  packer cluster k8s pvc --name in224 --storage-class nfs-client --out-size 200Gi | kubectl apply -f -
  packer cluster k8s plan --name in224 --image registry.example/packer@sha256:... \
      --src /data/train --src-claim imagenet --build-args "--resize 256 --crop 224" | kubectl apply -f -
  kubectl wait --for=condition=complete --timeout=24h job/in224-plan
  packer cluster k8s parts --name in224 --image registry.example/packer@sha256:... --parts 64 \
      --src-claim imagenet --build-args "--resize 256 --crop 224" | kubectl apply -f -
  kubectl wait --for=condition=complete --timeout=24h job/in224-parts
  packer cluster k8s merge --name in224 --image registry.example/packer@sha256:... --parts 64 | kubectl apply -f -

Values are written into the YAML as they are: no quotes, backslashes, spaces, | or & in them.
See docs/cluster.md.
` + exitStatusHelp,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			out, err := renderK8s(args[0], v)
			if err != nil {
				return usagef(err)
			}
			_, err = io.Out.Write(out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&v.name, "name", "", "the dataset's name: Job names, /out/NAME (PACKER_NAME)")
	f.StringVar(&v.image, "image", "", "plan, parts, merge: the image, best by digest: registry/packer@sha256:... (PACKER_IMAGE)")
	f.StringVar(&v.parts, "parts", "", "parts, merge: the number of parts (PACKER_PARTS)")
	f.StringVar(&v.src, "src", "", "plan, and parts with --no-plan: the source's path in the pod, under /data (PACKER_SRC)")
	f.BoolVar(&v.noPlan, "no-plan", false, "parts: build from --src itself, each pod listing it, not from the plan Job's plan; plan is refused (PACKER_PLAN=0)")
	f.StringVar(&v.srcClaim, "src-claim", "", "plan, parts: the claim of the source's volume, mounted read-only at /data (PACKER_SRC_CLAIM)")
	f.StringVar(&v.buildArgs, "build-args", "", `plan, parts: packer build flags, split on spaces, as "--resize 256 --crop 224"; the plan takes those packer plan takes (PACKER_BUILD_ARGS)`)
	f.StringVar(&v.storageClass, "storage-class", "", "pvc: a storage class whose volumes are ReadWriteMany (PACKER_STORAGE_CLASS)")
	f.StringVar(&v.outSize, "out-size", "", "pvc: the output volume's size: about the dataset, twice for parts merged by rewriting (PACKER_OUT_SIZE)")
	f.StringVar(&v.outClaim, "out-claim", "packer-out", "the output volume's claim (PACKER_OUT_CLAIM)")
	f.StringVar(&v.parallelism, "parallelism", "", "parts: pods at once (default: --parts) (PACKER_PARALLELISM)")
	f.StringVar(&v.cpu, "cpu", "4", "plan, parts: CPUs of a pod (PACKER_CPU)")
	f.StringVar(&v.memory, "memory", "8Gi", "plan, parts: memory of the plan's pod and of a part's (PACKER_MEMORY)")
	f.StringVar(&v.mergeMemory, "merge-memory", "1Gi", "merge: memory of the merge's pod (PACKER_MERGE_MEMORY)")
	f.StringVar(&v.retries, "retries", "2", "retries of each part, and of the merge (PACKER_RETRIES)")
	return cmd
}

// k8sWordUnsafe matches what a value may not hold: it is written into the YAML as it is.
var k8sWordUnsafe = regexp.MustCompile(`["\\'|&[:space:]]`)

var k8sCount = regexp.MustCompile(`^[1-9][0-9]*$`)

var k8sPlaceholder = regexp.MustCompile(`@[A-Z_]+@`)

// renderK8s fills the template of what from v as scripts/k8s/render.sh does (same checks, same
// substitutions in the same order), and refuses a result with a placeholder left unfilled.
func renderK8s(what string, v k8sValues) ([]byte, error) {
	tmpl, ok := k8sTemplates[what]
	if !ok {
		return nil, fmt.Errorf("%q: want pvc, plan, parts or merge", what)
	}
	word := func(flag, val string) (string, error) {
		if k8sWordUnsafe.MatchString(val) {
			return "", fmt.Errorf("--%s %s: quotes, backslashes, spaces, | and & are not allowed", flag, val)
		}
		return val, nil
	}
	need := func(flag, val, why string) (string, error) {
		if val == "" {
			return "", fmt.Errorf("%s: set --%s (%s)", what, flag, why)
		}
		return word(flag, val)
	}
	var err error
	check := func(s string, e error) string {
		if err == nil {
			err = e
		}
		return s
	}
	name := check(need("name", v.name, "the dataset's name: Job names, /out/NAME"))
	outClaim := check(word("out-claim", v.outClaim))
	retries := check(word("retries", v.retries))
	var class, size, image, parts, parallelism, cpu, memory, mergeMemory, src, srcClaim, buildArgs, planArgs, mergeParts string
	if what == "pvc" {
		class = check(need("storage-class", v.storageClass, "a storage class whose volumes are ReadWriteMany"))
		size = check(need("out-size", v.outSize, "the output volume's size: parts plus the merged dataset: about the dataset, its parts linked into it (--cut-inputs), twice without"))
	} else {
		image = check(need("image", v.image, "the image, best by digest: registry/packer@sha256:..."))
		if what != "plan" {
			parts = check(need("parts", v.parts, "the number of parts"))
			if err == nil && !k8sCount.MatchString(parts) {
				err = fmt.Errorf("--parts %s: want a positive number", parts)
			}
			parallelism = parts
			if v.parallelism != "" {
				parallelism = check(word("parallelism", v.parallelism))
			}
		}
		cpu = check(word("cpu", v.cpu))
		memory = check(word("memory", v.memory))
		mergeMemory = check(word("merge-memory", v.mergeMemory))
	}
	if err != nil {
		return nil, err
	}
	n := 1
	if parts != "" {
		if n, err = strconv.Atoi(parts); err != nil {
			return nil, fmt.Errorf("--parts %s: %w", parts, err)
		}
	}
	last := n - 1
	if v.noPlan && what == "plan" {
		return nil, errors.New("--no-plan: there is no plan Job (the parts Job lists --src itself)")
	}
	noPlan := v.noPlan && what == "parts"
	switch what {
	case "plan", "parts":
		if what == "plan" || noPlan {
			src = check(need("src", v.src, "the source's path in the pod (a folder or a file): under /data, where --src-claim is mounted"))
			if err == nil && src != "/data" && !strings.HasPrefix(src, "/data/") {
				err = fmt.Errorf("--src %s: want a path under /data", src)
			}
		}
		srcClaim = check(need("src-claim", v.srcClaim, "the claim of the source's volume"))
		var ws []string
		for _, w := range strings.Fields(v.buildArgs) {
			ws = append(ws, check(word("build-args", w)))
		}
		if what == "plan" {
			ws = planArgsOf(ws)
		}
		for _, w := range ws {
			buildArgs += ", \"" + w + "\""
		}
		if what == "plan" {
			planArgs, buildArgs = buildArgs, ""
		}
	case "merge":
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, ", /out/%s.parts/part-%d", name, i)
		}
		mergeParts = b.String()
	}
	if err != nil {
		return nil, err
	}
	// The parts build from the plan the plan Job wrote, or with --no-plan from the source.
	partsSrc := "/out/" + name + ".plan"
	if noPlan {
		partsSrc = "\"" + src + "\""
	}
	data, err := fs.ReadFile(k8s.Templates, tmpl)
	if err != nil {
		return nil, err
	}
	out := string(data)
	for _, r := range [][2]string{
		{"@NAME@", name}, {"@OUT_CLAIM@", outClaim}, {"@STORAGE_CLASS@", class}, {"@OUT_SIZE@", size},
		{"@IMAGE@", image}, {"@PARTS@", parts}, {"@LAST@", strconv.Itoa(last)},
		{"@PARALLELISM@", parallelism}, {"@RETRIES@", retries},
		{"@CPU@", cpu}, {"@MEMORY@", memory}, {"@MERGE_MEMORY@", mergeMemory},
		{"@SRC@", src}, {"@SRC_CLAIM@", srcClaim}, {"@PARTS_SRC@", partsSrc},
		{"@BUILD_ARGS@", buildArgs}, {"@PLAN_ARGS@", planArgs}, {"@MERGE_PARTS@", mergeParts},
	} {
		out = strings.ReplaceAll(out, r[0], r[1])
	}
	if left := k8sPlaceholder.FindString(out); left != "" {
		return nil, fmt.Errorf("internal error: %s: %s left unfilled", tmpl, left)
	}
	return []byte(out), nil
}

// planArgsOf picks out of build flags, one word each, those packer plan takes, each with its
// value (the next word, unless given as --flag=value or the flag takes none), as render.sh and
// scripts/slurm/submit.sh do.
func planArgsOf(args []string) []string {
	flags := newPlanCommand(&iostreams{}, nil).Flags()
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, inline := strings.Cut(a[2:], "=")
		f := flags.Lookup(name)
		if f == nil || name == "out" || name == "force" {
			continue
		}
		out = append(out, a)
		if !inline && f.Value.Type() != "bool" && i+1 < len(args) {
			out = append(out, args[i+1])
			i++
		}
	}
	return out
}
