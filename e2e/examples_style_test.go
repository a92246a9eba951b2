package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	_ "image/png" // image.DecodeConfig of the endpoints' answers
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var styleNames = []string{"sepia", "sketch", "dream"}

// chromiumPath is Debian's Chromium, or skips (fails under
// SAGEBOX_STRICT_TOOLS=1) when it is not installed.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	requireTool(t, "chromium")
	return "chromium"
}

// makeStyles trains the example's styles into a temporary directory.
func makeStyles(ctx context.Context, t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out := runPython(ctx, t, nil, "examples/style/make_styles.py", dir)
	for _, s := range styleNames {
		if _, err := os.Stat(filepath.Join(dir, s, "model.tar.gz")); err != nil {
			t.Fatalf("make_styles.py wrote no %s model: %v\n%s", s, err, out)
		}
	}
	return dir
}

// testPicture is a JPEG with colour gradients, shapes and sharp edges, so
// each style (colour toning, edges, blur) changes it visibly.
func testPicture(t *testing.T, w, h int) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.RGBA{uint8(255 * x / w), uint8(255 * y / h), 140, 255}
			if (x-w/3)*(x-w/3)+(y-h/2)*(y-h/2) < (h/4)*(h/4) {
				c = color.RGBA{240, 200, 40, 255}
			}
			if x > w*2/3 && x < w*9/10 && y > h/2 && y < h*9/10 {
				c = color.RGBA{20, 60, 200, 255}
			}
			if (x+y)%23 < 2 {
				c = color.RGBA{250, 250, 250, 255}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 92}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "picture.jpg")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// pagePixels is what readPixels returns for an <img> in the page.
type pagePixels struct {
	W  int    `json:"w"`
	H  int    `json:"h"`
	Px string `json:"px"` // base64 of the RGBA bytes, as the page's canvas read them
}

// readPixels draws the image to a canvas in the page and reads it back.
const readPixels = `((id) => {
  const img = document.getElementById(id);
  const c = document.createElement("canvas");
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext("2d");
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let s = "";
  for (let i = 0; i < d.length; i += 0x8000) s += String.fromCharCode.apply(null, d.subarray(i, i + 0x8000));
  return {w: c.width, h: c.height, px: btoa(s)};
})`

// meanDiff is the mean absolute difference of two RGBA images' RGB values (0-255).
func meanDiff(t *testing.T, a, b []byte) float64 {
	t.Helper()
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("images of %d and %d bytes", len(a), len(b))
	}
	var sum, n float64
	for i := range a {
		if i%4 == 3 {
			continue
		}
		d := float64(a[i]) - float64(b[i])
		if d < 0 {
			d = -d
		}
		sum += d
		n++
	}
	return sum / n
}

// checkStylePage drives the example's web page at url in headless
// Chromium: upload a picture, apply each style, and check that the
// picture shown has the input's size and differs between styles and from
// the input.
func checkStylePage(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	const w, h = 160, 120
	picture := testPicture(t, w, h)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()

	poll := func(cond string, d time.Duration) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(d))
	}
	err := chromedp.Do(bctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("file")),
		poll(`document.getElementById("style").options.length === 3`, 10*time.Second),
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{picture}),
		chromedp.WaitEnabled(chromedp.ID("apply")),
		poll(`document.getElementById("original").complete && document.getElementById("original").naturalWidth > 0`, 10*time.Second),
	)
	if err != nil {
		t.Fatalf("upload a picture in the page: %v", err)
	}
	original, err := chromedp.Run(bctx, chromedp.Evaluate[pagePixels](readPixels+`("original")`))
	if err != nil {
		t.Fatal(err)
	}
	if original.W != w || original.H != h {
		t.Fatalf("original shown as %dx%d, want %dx%d", original.W, original.H, w, h)
	}
	orig, _ := base64.StdEncoding.DecodeString(original.Px)

	results := map[string][]byte{}
	for _, style := range styleNames {
		err := chromedp.Do(bctx,
			chromedp.SetValue(chromedp.ID("style"), style),
			chromedp.Click(chromedp.ID("apply")),
			poll(fmt.Sprintf(`document.getElementById("status").dataset.state === "error" ||
				(document.getElementById("status").dataset.state === "done" && document.getElementById("result").dataset.style === %q)`, style),
				60*time.Second),
		)
		if err != nil {
			t.Fatalf("apply %s in the page: %v", style, err)
		}
		status, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("status")))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(status, "Done: "+style) {
			t.Fatalf("after applying %s the page says %q", style, status)
		}
		got, err := chromedp.Run(bctx, chromedp.Evaluate[pagePixels](readPixels+`("result")`))
		if err != nil {
			t.Fatal(err)
		}
		if got.W != w || got.H != h {
			t.Errorf("%s: result shown as %dx%d, want the input's %dx%d", style, got.W, got.H, w, h)
		}
		px, err := base64.StdEncoding.DecodeString(got.Px)
		if err != nil {
			t.Fatal(err)
		}
		if d := meanDiff(t, px, orig); d < 10 {
			t.Errorf("%s: result differs from the input by only %.1f/255 on average", style, d)
		}
		t.Logf("%s: %dx%d, %.1f/255 from the input", style, got.W, got.H, meanDiff(t, px, orig))
		results[style] = px
	}
	for i, a := range styleNames {
		for _, b := range styleNames[i+1:] {
			if d := meanDiff(t, results[a], results[b]); d < 10 {
				t.Errorf("styles %s and %s differ by only %.1f/255 on average", a, b, d)
			}
		}
	}
}

// checkRouterErrors sends the router requests a caller must fix: each is a
// 400 with a JSON error that says what is wrong.
func checkRouterErrors(t *testing.T, url string) {
	t.Helper()
	jpg, err := os.ReadFile(testPicture(t, 32, 24))
	if err != nil {
		t.Fatal(err)
	}
	data := base64.StdEncoding.EncodeToString(jpg)
	for _, c := range []struct{ name, body, want string }{
		{"unknown style", `{"data":"` + data + `","style":"cubism"}`, "unknown style 'cubism'; choose one of: sepia, sketch, dream"},
		{"no style", `{"data":"` + data + `"}`, "unknown style None"},
		{"bad JSON", `{"data":`, "the body is not JSON"},
		{"not an object", `["sepia"]`, "send a JSON object"},
		{"bad base64", `{"data":"not base64!","style":"sepia"}`, `"data" is not valid base64`},
		{"no data", `{"style":"sepia"}`, `"data" must be the picture as a base64 string`},
		{"not a picture", `{"data":"aGVsbG8=","style":"sepia"}`, "neither a JPEG nor a PNG"},
	} {
		resp, err := http.Post(url+"style", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		if resp.StatusCode != 400 || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, c.want) {
			t.Errorf("%s: %d %s, want 400 with an error containing %q", c.name, resp.StatusCode, b, c.want)
		}
	}
}

// The router's --direct mode, for development without endpoints: two
// styles, each answered by its own `sagebox model-server`; the answer is a
// PNG of the input's size, different per style.
func TestExampleStyleDirect(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	requireTool(t, "/usr/bin/python3", "-c", "import PIL")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	models := makeStyles(ctx, t)
	args := []string{"examples/style/router.py", "--listen", "127.0.0.1:0"}
	for _, s := range styleNames[:2] {
		ms := startModelServer(t, []string{"SAGEMAKER_MODEL_SERVER_WORKERS=1"}, "--model-data", filepath.Join(models, s, "model.tar.gz"))
		args = append(args, "--direct", s+"="+ms.url)
	}
	_, url := startPython(t, nil, "router listening on ", 30*time.Second, args...)
	jpg, err := os.ReadFile(testPicture(t, 90, 60))
	if err != nil {
		t.Fatal(err)
	}
	var pictures [][]byte
	for _, style := range styleNames[:2] {
		body, _ := json.Marshal(map[string]string{"data": base64.StdEncoding.EncodeToString(jpg), "style": style})
		resp, err := http.Post(url+"style", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var answer struct{ Prediction string }
		if resp.StatusCode != 200 || json.Unmarshal(b, &answer) != nil {
			t.Fatalf("%s: %d %.300s", style, resp.StatusCode, b)
		}
		png, err := base64.StdEncoding.DecodeString(answer.Prediction)
		if err != nil {
			t.Fatal(err)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(png))
		if err != nil || format != "png" || cfg.Width != 90 || cfg.Height != 60 {
			t.Errorf("%s: %s %dx%d (%v), want a 90x60 png", style, format, cfg.Width, cfg.Height, err)
		}
		pictures = append(pictures, png)
	}
	if bytes.Equal(pictures[0], pictures[1]) {
		t.Errorf("%s and %s gave the same picture", styleNames[0], styleNames[1])
	}
	resp, err := http.Post(url+"style", "application/json", strings.NewReader(`{"data":"aGVsbG8=","style":"dream"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "unknown style 'dream'; choose one of: sepia, sketch") {
		t.Errorf("a style the router was not given: %d %s", resp.StatusCode, b)
	}
}
