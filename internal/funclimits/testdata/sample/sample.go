package sample

type T struct{}

func short() {}

func (t *T) long() {
	_ = 1
	_ = 2
	_ = 3
}
