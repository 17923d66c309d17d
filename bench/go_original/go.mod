module deviceshadow.bench/go_original

go 1.23

require github.com/mariotoffia/godeviceshadow v0.0.0
