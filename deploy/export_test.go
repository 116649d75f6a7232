package deploy

// File is one of the shipped files by its path in deploy/.
func File(name string) (string, error) {
	b, err := files.ReadFile(name)
	return string(b), err
}
