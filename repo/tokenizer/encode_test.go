package tokenizer

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

func loadSmall(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Load(filepath.Join("testdata", "small-wordpiece.json"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestEncodeWordPiece(t *testing.T) {
	tok := loadSmall(t)
	// "café" loses its accent (strip_accents) but its offsets keep the
	// two bytes of "é"; "Xx" is [UNK] ("X" is not in the vocabulary and
	// lowercase is off), as is an 11-character word (max 10).
	enc, err := tok.Encode("hello worlds unwanted café Xx xxxxxxxxxxx", true)
	if err != nil {
		t.Fatal(err)
	}
	wantTokens := []string{"[CLS]", "hello", "world", "##s", "un", "##want", "##ed", "cafe", "[UNK]", "[UNK]", "[SEP]"}
	wantOffsets := [][2]int{{0, 0}, {0, 5}, {6, 11}, {11, 12}, {13, 15}, {15, 19}, {19, 21}, {22, 27}, {28, 30}, {31, 42}, {0, 0}}
	if !reflect.DeepEqual(enc.Tokens, wantTokens) || !reflect.DeepEqual(enc.Offsets, wantOffsets) {
		t.Errorf("got %q %v\nwant %q %v", enc.Tokens, enc.Offsets, wantTokens, wantOffsets)
	}
	if enc.Len() != len(enc.TypeIDs) || enc.Len() != len(enc.AttentionMask) || enc.Len() != len(enc.Special) {
		t.Errorf("ragged encoding %+v", enc)
	}
}

func TestTruncationErrors(t *testing.T) {
	tok := loadSmall(t)
	tr := *tok.trunc
	tr.Strategy = "OnlySecond"
	cp := *tok
	cp.trunc = &tr
	if _, err := cp.Encode("a b a b a b a b a b a b a b", true); !errors.Is(err, ErrSequenceTooShort) {
		t.Errorf("OnlySecond on one sequence: err %v", err)
	}
	if _, err := cp.EncodePair("a b a b a b a b a b a b a b", "x", true); !errors.Is(err, ErrSequenceTooShort) {
		t.Errorf("OnlySecond with a short second: err %v", err)
	}
	if enc, err := cp.EncodePair("a", "b", true); err != nil || enc.Len() != 5 {
		t.Errorf("under max_length: %v %v", enc.Tokens, err)
	}
}

// TestConcurrentEncode encodes from many goroutines at once with the BPE
// word cache filling up underneath, and checks each result against a
// sequential encoding by a fresh tokenizer (go test -race checks the
// cache's synchronization).
func TestConcurrentEncode(t *testing.T) {
	texts := []string{"Hello there, general Kenobi!", "the the the quick quick fox", "naïve café 日本語 😀", "x"}
	for _, name := range []string{"small-bpe.json", "small-bpe-qwen2.json", "small-unigram-xlmr.json"} {
		fresh, err := Load(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]Encoding, len(texts))
		for i, s := range texts {
			if want[i], err = fresh.Encode(s, true); err != nil {
				t.Fatal(err)
			}
		}
		shared, err := Load(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 8*len(texts))
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 20; k++ {
					i := (g + k) % len(texts)
					got, err := shared.Encode(texts[i], true)
					if err != nil || !reflect.DeepEqual(got, want[i]) {
						errs <- fmt.Sprintf("%s %q: got %v %v, want %v", name, texts[i], got.Tokens, err, want[i].Tokens)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}
